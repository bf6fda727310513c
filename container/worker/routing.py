"""What a shared worker's runs print and log goes to each run's own log: routed by a context
variable that each run binds in its own ``contextvars.Context``.

``RoutedStream`` takes the worker's ``sys.stdout`` and ``sys.stderr`` (and so the log
handler ``configure_logging`` installs on it): a write goes to the stream of the run whose
context is current, else to the worker's own. ``inherit_context_in_threads`` makes every
thread started afterwards run in a copy of its starter's context (as Python 3.14's
``thread_inherit_context`` does), so a run's rule threads, its sinks' threads and whatever
they start log as the run. The worker's shared event loop thread is started before any run
(``container.worker.serve``): it keeps the worker's empty context, and each coroutine
submitted to it runs in its submitter's (asyncio copies the context of the call).
"""

from __future__ import annotations

import contextvars
import io
import threading
from contextlib import suppress
from typing import TextIO

__all__ = ["RoutedStream", "inherit_context_in_threads", "run_context"]

_RUN_STREAM: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar(
    "worker_run_stream", default=None
)
_patched = False


def run_context(stream: TextIO) -> contextvars.Context:
    """A new context (a copy of the caller's) in which output goes to ``stream``."""
    context = contextvars.copy_context()
    context.run(_RUN_STREAM.set, stream)
    return context


class RoutedStream(io.TextIOBase):
    """Writes to the current run's stream, else (no run bound, or its stream closed: a
    thread that outlived its run) to ``fallback``."""

    def __init__(self, fallback: TextIO) -> None:
        super().__init__()
        self._fallback = fallback

    def _target(self) -> TextIO:
        stream = _RUN_STREAM.get()
        return self._fallback if stream is None or stream.closed else stream

    def write(self, text: str) -> int:
        target = self._target()
        try:
            return target.write(text)
        except ValueError:  # closed between the look and the write
            return self._fallback.write(text)

    def flush(self) -> None:
        with suppress(OSError, ValueError):  # a stream closed under us: nothing to flush
            self._target().flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def inherit_context_in_threads() -> None:
    """From now on, in this process, a thread runs in a copy of the context of the thread
    that started it (idempotent)."""
    global _patched
    if _patched:
        return
    _patched = True
    start = threading.Thread.start

    def start_in_context(self: threading.Thread) -> None:
        context = contextvars.copy_context()
        run = self.run
        self.run = lambda: context.run(run)  # type: ignore[method-assign]
        start(self)

    threading.Thread.start = start_in_context  # type: ignore[method-assign]
