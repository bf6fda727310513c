"""One asyncio event loop on one background thread, shared by every trial of the process.

The Trial/Tensor API is synchronous (rules call it from plain code); storage and polling are
async. ``BackgroundLoop.run`` is the single bridge: it submits a coroutine to the background
loop and waits for its result in the calling thread.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "get_loop"]

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running forever on a daemon thread."""

    def __init__(self, name: str = "evaluator-io") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("BackgroundLoop.run called on the loop's own thread; await instead")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def close(self) -> None:
        """Cancel what still runs (background pollers), then stop the loop and its thread."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            try:
                self.submit(_cancel_all()).result(timeout=5)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_lock = threading.Lock()
_shared: BackgroundLoop | None = None


def get_loop() -> BackgroundLoop:
    """The process-wide background loop, started on first use."""
    global _shared
    with _lock:
        if _shared is None or _shared.loop.is_closed():
            _shared = BackgroundLoop()
            atexit.register(_shared.close)
        return _shared
