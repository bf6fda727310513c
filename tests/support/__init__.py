"""Test doubles and helpers shared by the test suites."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from evaluator.storage.base import ObjectInfo, Storage

__all__ = ["collect", "run", "run_with"]

T = TypeVar("T")
S = TypeVar("S", bound=Storage)


def run(coroutine: Coroutine[Any, Any, T], *, timeout: float = 60.0) -> T:
    """Run a coroutine on a fresh event loop, failing after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def run_with(storage: S, body: Callable[[S], Awaitable[T]], *, timeout: float = 60.0) -> T:
    """Run ``body(storage)`` on a fresh loop and close the storage on that same loop."""

    async def main() -> T:
        try:
            return await body(storage)
        finally:
            await storage.aclose()

    return run(main(), timeout=timeout)


async def collect(
    storage: Storage, prefix: str = "", start_after: str | None = None
) -> list[ObjectInfo]:
    """Everything ``list_after`` yields, as a list."""
    return [info async for info in storage.list_after(prefix, start_after)]
