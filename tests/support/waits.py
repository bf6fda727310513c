"""Waiting in tests for something another process or thread does: a file to appear, a process
to end. One polling loop, so every test waits the same way and says how long it gives."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["wait_for_file", "wait_until"]


def wait_until(condition: Callable[[], object], *, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` every ``interval`` seconds until it holds or ``timeout`` seconds have
    passed; whether it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def wait_for_file(path: Path, *, timeout: float = 30.0, interval: float = 0.05) -> bool:
    """``wait_until`` ``path`` exists."""
    return wait_until(path.exists, timeout=timeout, interval=interval)
