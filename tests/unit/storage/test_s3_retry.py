"""The S3 retry rules (``s3_retry``): what is retried, how long a pause may be, and how the retry
quota stops a client from retrying into a failing service."""

from __future__ import annotations

import asyncio

import pytest

from evaluator.storage.s3_retry import THROTTLING_CODES, RetryRules


@pytest.mark.parametrize(
    ("status", "code", "retried"),
    [
        (None, "", True),  # no answer at all: refused, reset, timed out
        (500, "InternalError", True),
        (503, "SlowDown", True),
        (502, "", True),
        (429, "", True),
        (400, "RequestTimeout", True),
        (400, "Throttling", True),
        (404, "NoSuchKey", False),
        (403, "AccessDenied", False),
        (400, "InvalidArgument", False),
        (301, "PermanentRedirect", False),
    ],
)
def test_what_is_retried(status: int | None, code: str, retried: bool) -> None:
    """No answer, 5xx, 429 and throttling or transient codes are retried; other 4xx are final."""
    assert RetryRules.retryable(status, code) is retried


def test_pauses_are_jittered_doubling_and_capped() -> None:
    """A pause is at most 0.1 s x 2^(attempt-1) (0.5 s after throttling), never above 20 s."""
    rules = RetryRules("standard", 10)
    for attempt in range(1, 12):
        for _ in range(50):
            assert 0 <= rules.delay(attempt, False) <= min(20.0, 0.1 * 2 ** (attempt - 1))
            assert 0 <= rules.delay(attempt, True) <= min(20.0, 0.5 * 2 ** (attempt - 1))
    assert max(rules.delay(30, True) for _ in range(50)) <= 20.0


def test_the_quota_runs_dry_and_successes_refill_it() -> None:
    """Retries spend the 500-token quota (5 each, 10 after a timeout) until none is left; a
    success gives back what its retries took."""
    rules = RetryRules("standard", 10)
    spent = [rules.acquire(timed_out=False) for _ in range(100)]
    assert spent == [5] * 100 and rules.acquire(timed_out=False) == 0
    rules.release(10)
    assert rules.acquire(timed_out=True) == 10
    assert rules.acquire(timed_out=False) == 0


def test_adaptive_mode_limits_the_rate_after_throttling() -> None:
    """Only ``adaptive`` mode has a rate limit; it is off until S3 throttles, halves on each
    throttle (down to one request every two seconds) and grows back by a tenth per success."""
    assert RetryRules("standard", 3).limiter is None
    limiter = RetryRules("adaptive", 3).limiter
    assert limiter is not None and limiter.rate is None

    async def send(n: int) -> None:
        for _ in range(n):
            await limiter.before_send()

    asyncio.run(send(8))
    assert limiter.rate is None  # sends are never held before a throttle
    limiter.after_answer(throttled=True)
    first = limiter.rate
    assert first is not None and first >= 0.5
    limiter.after_answer(throttled=True)
    assert limiter.rate == max(0.5, first / 2)
    limiter.after_answer(throttled=False)
    assert limiter.rate == pytest.approx(max(0.5, first / 2) * 1.1)
    for _ in range(20):
        limiter.after_answer(throttled=True)
    assert limiter.rate == 0.5
    assert "SlowDown" in THROTTLING_CODES
