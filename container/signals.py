"""SIGTERM / SIGINT: ask the evaluation to stop, and end it within seconds.

SageMaker stops a processing job with SIGINT then SIGKILL; ``docker stop`` sends SIGTERM. The
handler sets ``stop`` (rule loops end at the next step boundary, and waits for data wake at
once: it is a ``StopEvent``) and remembers the signal for the exit code (128 + signal number). During setup
(reading the configuration, opening the trial) nothing polls ``stop``, so the handler raises
``StopRequested`` in the main thread instead.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from evaluator.engine.stop import StopEvent
from evaluator.errors import StopRequested

__all__ = ["StopRequested", "StopSignals"]


class StopSignals:
    """Context manager installing the handlers; ``stop`` is set when a signal arrives."""

    def __init__(self, *, raise_in_main: bool = True) -> None:
        self.stop: threading.Event = StopEvent()
        self.signum: int | None = None
        self.raise_in_main = raise_in_main
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            # The stop is under way. This handler may run inside the first one's ``set``
            # (Python runs handlers between any two bytecodes), which holds the event's own
            # lock: setting it again there would wait for that lock forever.
            return
        self.signum = signum
        self.stop.set()
        if self.raise_in_main:
            raise StopRequested(signum)
