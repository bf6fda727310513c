"""``WaitNotice``: a wait that says what it awaits, for how long so far, what would end it and
which setting changes that, at most every ``interval`` seconds. Cheap enough to tick on every
wake-up (one clock read); it knows when its next line is due, so a waiter sleeps until then."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

__all__ = ["WaitNotice", "end_of_data"]

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
        ends_when: str = "",
        to_change: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.awaited = awaited
        self.ends_when = ends_when
        self.to_change = to_change
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
        said = {"ends_when": self.ends_when, "to_change": self.to_change}
        log.info(
            "waiting",
            awaited=self.awaited,
            trial=self.uri,
            waited_seconds=round(now - self.started),
            **{k: v for k, v in said.items() if v},
        )

    def due_in(self) -> float:
        """Seconds until the next line is due (0 when it is): how long a waiter may sleep."""
        return max(0.0, self._said + self.interval - self._clock())


def end_of_data(
    idle_scans_to_complete: int | None, stop_signal_file: str | None
) -> tuple[str, str]:
    """(what ends a wait for more steps, the setting that changes it), for ``waiting`` lines."""
    if idle_scans_to_complete is None:
        ends = "training_job_end.ts appears in the trial (training has ended)"
        change = (
            "for a finished trial without that marker (a copy, an upload), set "
            "wait_for_training_end=false (--wait-for-training-end false) to end after idle scans"
        )
    else:
        ends = (
            f"training_job_end.ts appears, or {idle_scans_to_complete} scans in a row find "
            "nothing new"
        )
        change = "set wait_for_training_end=true to wait for training_job_end.ts only"
    if stop_signal_file:
        ends += f", or the stop signal {stop_signal_file}"
    return ends, change
