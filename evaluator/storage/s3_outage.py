"""An outage of S3, as one storage lives through it: a request that used up its deadline
against an endpoint that answered before is not the end. The storage keeps sending it, with
jittered pauses, for ``tolerance`` seconds counted from the start of the outage (one clock for
the whole storage, shared by all requests in flight), logging one line every ``log_interval``
seconds while it lasts and one when S3 answers again."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from botocore.exceptions import BotoCoreError, ClientError

from evaluator.errors import StorageError

__all__ = ["Outage", "Unanswered"]

_PAUSE_MAX = 15.0


class Unanswered(Exception):
    """A request used up its attempts or its deadline without a usable answer: no answer at
    all, or only 5xx and throttling answers. ``error`` is the last botocore exception."""

    def __init__(self, error: BotoCoreError | ClientError, attempts: int, seconds: float) -> None:
        super().__init__(str(error))
        self.error, self.attempts, self.seconds = error, attempts, seconds


class Outage:
    """The outage clock of one storage; ``log`` is the storage's logger."""

    def __init__(self, tolerance: float, log_interval: float, log: logging.Logger) -> None:
        self.tolerance, self._log_interval, self._log = tolerance, log_interval, log
        self._since: float | None = None
        self._logged: float | None = None

    async def wait_out(self, endpoint: str, target: str, failure: Unanswered) -> None:
        """Pause during an outage, logging it at most once per ``log_interval``; raise once it
        has lasted ``tolerance`` seconds."""
        now = time.monotonic()
        if self._since is None:
            self._since = now - failure.seconds
        down_for = now - self._since
        if down_for >= self.tolerance:
            raise StorageError(
                f"S3 at {endpoint} has not answered for {down_for:.0f} s, more than the "
                f"{self.tolerance:g} s an outage is waited out (reading {target}; "
                f"last error: {failure.error}); check S3's health and the network path",
                uri=target,
            ) from failure.error
        if self._logged is None or now - self._logged >= self._log_interval:
            self._logged = now
            self._log.warning(
                "S3 at %s: no usable answer for %.0f s (%s); retrying for up to %g s",
                endpoint,
                down_for,
                _failure_kind(failure.error),
                self.tolerance,
            )
        cap = min(_PAUSE_MAX, self.tolerance / 10)
        pause = random.uniform(cap / 2, cap)
        await asyncio.sleep(min(pause, max(0.0, self.tolerance - down_for)))

    def answered(self, endpoint: str) -> None:
        """S3 answered: an outage in course is over."""
        if self._since is not None:
            self._log.warning(
                "S3 answers again after %.0f s: %s", time.monotonic() - self._since, endpoint
            )
            self._since = self._logged = None


def _failure_kind(error: BaseException) -> str:
    """``ReadTimeoutError``, or S3's code (``SlowDown``, ``InternalError``) for an answer."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or "error answers")
    return type(error).__name__
