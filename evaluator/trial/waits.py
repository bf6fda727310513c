"""``WaitNotice``: a wait that says what it awaits, and for how long so far, at most every
``interval`` seconds. Cheap enough to tick on every wake-up (one clock read)."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

__all__ = ["WaitNotice"]

log = structlog.get_logger("evaluator.trial")


class WaitNotice:
    """Logs ``waiting`` (what, where, seconds so far) once ``interval`` has passed since the
    wait began or since the previous line."""

    def __init__(
        self,
        awaited: str,
        uri: str,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.awaited = awaited
        self.uri = uri
        self.interval = interval
        self._clock = clock
        self.started = self._said = clock()

    def tick(self, awaited: str | None = None) -> None:
        """Say the wait is still on if ``interval`` has passed; ``awaited`` updates the text."""
        if awaited is not None:
            self.awaited = awaited
        now = self._clock()
        if now - self._said < self.interval:
            return
        self._said = now
        log.info(
            "waiting",
            awaited=self.awaited,
            trial=self.uri,
            waited_seconds=round(now - self.started),
        )
