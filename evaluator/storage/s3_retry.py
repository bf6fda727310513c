"""When an S3 request is sent again, and after how long: the AWS SDKs' standard retry mode.

The rules (as the SDKs document them for their ``standard`` mode; written here, so that no
SDK's private classes are leaned on):

* **what is retried**: a request that got no answer (refused, reset, timed out), a 5xx answer,
  and a throttling answer (``SlowDown``, ``Throttling``, 429 ...). 4xx answers are final;
* **how many times**: ``max_attempts`` attempts in all, the first included;
* **the back-off**: full jitter, a random pause up to ``0.1 s x 2^(attempt - 1)`` (after
  throttling, up to ``0.5 s x 2^(attempt - 1)``), at most 20 s;
* **the retry quota**: one bucket of 500 tokens per storage; a retry costs 5 (10 after a
  timeout), a success gives back what its retries cost (1 when it needed none). An empty quota
  stops retrying: when most requests fail, a client that keeps retrying only adds to the load;
* ``adaptive`` mode adds a client-side rate limit after a throttling answer: the sending rate
  halves on each throttle (down to one request every two seconds) and grows back by a tenth
  per success, until it no longer limits anything.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque

__all__ = ["RetryRules", "THROTTLING_CODES"]

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
_TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "InternalError"})
_TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
_BASE, _THROTTLED_BASE, _MAX_BACKOFF = 0.1, 0.5, 20.0
_QUOTA, _RETRY_COST, _TIMEOUT_COST, _NO_RETRY_REFUND = 500, 5, 10, 1


class RetryRules:
    """The retry decisions of one storage (its quota and rate limit are shared by all its
    requests). ``mode`` is ``"standard"`` or ``"adaptive"``."""

    def __init__(self, mode: str, max_attempts: int) -> None:
        self.max_attempts = max_attempts
        self._quota = _QUOTA
        self.limiter = _RateLimiter() if mode == "adaptive" else None

    @staticmethod
    def retryable(status: int | None, code: str) -> bool:
        """Whether an answer (``status`` and S3's error ``code``), or no answer at all
        (``status`` None), is worth another attempt."""
        if status is None:
            return True
        return (
            status == 429
            or status in _TRANSIENT_STATUS
            or code in THROTTLING_CODES
            or code in _TRANSIENT_CODES
        )

    @staticmethod
    def throttled(status: int | None, code: str) -> bool:
        """Whether the answer asks the client to slow down."""
        return status == 429 or code in THROTTLING_CODES

    def delay(self, attempt: int, throttled: bool) -> float:
        """The pause before attempt ``attempt + 1``, after ``attempt`` failed."""
        base = _THROTTLED_BASE if throttled else _BASE
        return random.uniform(0, min(_MAX_BACKOFF, base * 2 ** (attempt - 1)))

    def acquire(self, timed_out: bool) -> int:
        """Take a retry's cost from the quota: the tokens taken, 0 when it is empty."""
        cost = _TIMEOUT_COST if timed_out else _RETRY_COST
        if self._quota < cost:
            return 0
        self._quota -= cost
        return cost

    def release(self, spent: int) -> None:
        """A request succeeded after its retries took ``spent`` tokens: give them back."""
        self._quota = min(_QUOTA, self._quota + (spent or _NO_RETRY_REFUND))


class _RateLimiter:
    """``adaptive`` mode's client-side rate limit, off until S3 first throttles."""

    def __init__(self) -> None:
        self._rate: float | None = None  # requests per second allowed; None: no limit
        self._next = 0.0
        self._sent: deque[float] = deque()

    @property
    def rate(self) -> float | None:
        """Requests per second allowed; None while nothing is limited."""
        return self._rate

    async def before_send(self) -> None:
        now = time.monotonic()
        self._sent.append(now)
        while self._sent and self._sent[0] < now - 1.0:
            self._sent.popleft()
        if self._rate is None:
            return
        wait = self._next - now
        self._next = max(now, self._next) + 1.0 / self._rate
        if wait > 0:
            await asyncio.sleep(wait)

    def after_answer(self, throttled: bool) -> None:
        if throttled:
            observed = self._rate if self._rate is not None else max(1.0, len(self._sent))
            self._rate = max(0.5, observed / 2)
        elif self._rate is not None:
            self._rate *= 1.1
            if self._rate > 1000:
                self._rate = None
