"""S3 deadlines and outages: a black-holed endpoint is given up in bounded time, an outage of an
endpoint that answered before is ridden out (with a log line while it lasts), and both say what
was tried. Real sockets on 127.0.0.1; the deadlines are set short so that the tests stay quick,
and the only time checks are generous "gave up, did not hang" bounds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.retries.standard import ExponentialBackoff

from evaluator.errors import StorageError
from evaluator.formats import Collection
from evaluator.formats.keys import END_OF_JOB_KEY
from evaluator.modes import ModeKeys
from evaluator.storage import S3Storage
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from tests.support import collect, run_with
from tests.support.faulty_proxy import FaultyProxy
from tests.support.s3server import MotoS3
from tests.support.stalling_endpoints import BlackHole, Switch, Trickle

HUNG = 30.0  # far above every budget below: failing this bound means "hung", not "slow"
SHORT = {"connect_timeout": 0.3, "read_timeout": 0.3, "request_deadline": 1.0}


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore waits up to 1, 2, 4 ... s between attempts; these tests bound the whole request
    by its deadline, and a short back-off lets several attempts fit in it."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.01)


@pytest.fixture
def trial(s3_server: MotoS3, s3_bucket: str) -> str:
    """A bucket with two small objects; returns the trial's URI."""
    s3_server.put_objects(s3_bucket, {"a.json": b"{}", "b.json": b"[]"}, prefix="run/")
    return f"s3://{s3_bucket}/run"


@pytest.fixture
def switch(s3_server: MotoS3) -> Iterator[Switch]:
    """A ``Switch`` in front of the moto server."""
    with Switch(s3_server.endpoint) as forwarder:
        yield forwarder


def _timed_failure(storage: S3Storage, body: Any) -> tuple[StorageError, float]:
    started = time.monotonic()
    with pytest.raises(StorageError) as error:
        run_with(storage, body, timeout=HUNG * 2)
    return error.value, time.monotonic() - started


@pytest.mark.parametrize("operation", ["read", "list", "exists"])
def test_a_black_holed_endpoint_is_given_up_naming_endpoint_attempts_and_time(
    trial: str, operation: str
) -> None:
    """An endpoint that accepts connections and never answers fails within the deadline, in a
    ClientError that names the endpoint, the attempts, the time and the per-attempt timeouts."""
    calls = {
        "read": lambda s: s.read("a.json"),
        "list": lambda s: collect(s, ""),
        "exists": lambda s: s.exists("a.json"),
    }
    with BlackHole() as hole:
        storage = S3Storage(trial, endpoint_url=hole.endpoint, count_requests=True, **SHORT)
        error, seconds = _timed_failure(storage, calls[operation])
    text = str(error)
    assert seconds < HUNG
    assert "cannot reach S3" in text and hole.endpoint in text and trial in text
    assert "attempts in" in text and "read timeout 0.3 s" in text and "within 1 s" in text
    assert sum(storage.request_counts.values()) >= 2  # retried before giving up


def test_the_deadline_not_the_attempt_count_bounds_the_time(trial: str) -> None:
    """With a hundred attempts allowed, the per-request deadline still ends the request."""
    with BlackHole() as hole:
        storage = S3Storage(
            trial, endpoint_url=hole.endpoint, max_attempts=100, count_requests=True, **SHORT
        )
        error, seconds = _timed_failure(storage, lambda s: s.read("a.json"))
    assert seconds < HUNG
    assert storage.request_counts["GetObject"] < 100
    assert "at most 100 attempts within 1 s per request" in str(error)


def test_a_black_hole_from_the_start_is_not_waited_out_as_an_outage(trial: str) -> None:
    """The outage tolerance applies only once the endpoint has answered: a long tolerance does
    not keep a run waiting on an endpoint that never answered."""
    with BlackHole() as hole:
        storage = S3Storage(trial, endpoint_url=hole.endpoint, outage_tolerance=3600, **SHORT)
        error, seconds = _timed_failure(storage, lambda s: s.read("a.json"))
    assert seconds < HUNG and "gave up after" in str(error)


def test_an_outage_after_answers_is_ridden_out_with_log_lines(
    trial: str, switch: Switch, caplog: pytest.LogCaptureFixture
) -> None:
    """S3 going silent after it answered is waited out: a log line while it lasts, one when it
    answers again, and the read returns the object."""
    caplog.set_level(logging.WARNING, logger="evaluator.storage.s3")
    storage = S3Storage(
        trial, endpoint_url=switch.endpoint, outage_tolerance=20, outage_log_interval=0.5, **SHORT
    )

    async def body(s: S3Storage) -> bytes:
        assert await s.read("a.json") == b"{}"
        switch.down()
        threading.Timer(2.5, switch.up).start()
        return await s.read("b.json")

    started = time.monotonic()
    assert run_with(storage, body, timeout=HUNG * 2) == b"[]"
    assert time.monotonic() - started < HUNG
    messages = [record.getMessage() for record in caplog.records]
    assert any("no usable answer for" in m and switch.endpoint in m for m in messages), messages
    assert any("answers again" in m for m in messages), messages


def test_throttling_that_outlasts_the_deadline_is_waited_out_naming_s3s_code(
    trial: str, switch: Switch, caplog: pytest.LogCaptureFixture
) -> None:
    """S3 answering only 503 SlowDown for longer than a request's deadline, after it answered,
    is waited out like an outage; the log line names S3's code."""
    caplog.set_level(logging.WARNING, logger="evaluator.storage.s3")
    storage = S3Storage(
        trial, endpoint_url=switch.endpoint, outage_tolerance=20, outage_log_interval=0.5, **SHORT
    )

    async def body(s: S3Storage) -> bytes:
        assert await s.read("a.json") == b"{}"
        switch.throttle()
        threading.Timer(2.5, switch.up).start()
        return await s.read("b.json")

    assert run_with(storage, body, timeout=HUNG * 2) == b"[]"
    messages = [record.getMessage() for record in caplog.records]
    assert any("no usable answer for" in m and "SlowDown" in m for m in messages), messages


def test_an_outage_longer_than_the_tolerance_fails_saying_so(trial: str, switch: Switch) -> None:
    """An outage that outlasts ``outage_tolerance`` ends in a ClientError naming the endpoint,
    how long S3 was silent and the tolerance."""
    storage = S3Storage(trial, endpoint_url=switch.endpoint, outage_tolerance=2.0, **SHORT)

    async def body(s: S3Storage) -> bytes:
        await s.read("a.json")
        switch.down()
        return await s.read("b.json")

    error, seconds = _timed_failure(storage, body)
    assert seconds < HUNG
    text = str(error)
    assert switch.endpoint in text and "has not answered for" in text and "2 s" in text


def test_a_live_trial_rides_out_an_outage(
    s3_server: MotoS3, s3_bucket: str, switch: Switch, tmp_path: Path
) -> None:
    """A running trial whose S3 goes silent for a few seconds sees the steps written meanwhile
    once S3 is back, and ends normally at the end marker."""
    local = tmp_path / "job"
    writer = TrialWriter(local)
    writer.write_collections([Collection("weights", include_regex=["^w"])])
    for step in range(6):
        writer.write_step(step, {"w": np.full(4, step, np.float32)}, mode=ModeKeys.TRAIN)
    files = {
        p.relative_to(local).as_posix(): p.read_bytes() for p in local.rglob("*") if p.is_file()
    }
    early = {k: v for k, v in files.items() if "000000000003" not in k and "000000000004" not in k}
    early = {k: v for k, v in early.items() if "000000000005" not in k}
    s3_server.put_objects(s3_bucket, early, prefix="live/")
    storage = S3Storage(
        f"s3://{s3_bucket}/live", endpoint_url=switch.endpoint, outage_tolerance=30, **SHORT
    )
    trial = create_trial(
        f"s3://{s3_bucket}/live", storage=storage, poll_interval=0.05, max_poll_interval=0.2
    )
    try:
        trial.wait_for_steps([2])
        switch.down()

        def recover() -> None:
            s3_server.put_objects(s3_bucket, files, prefix="live/")
            s3_server.put_objects(s3_bucket, {END_OF_JOB_KEY: b""}, prefix="live/")
            switch.up()

        threading.Timer(2.0, recover).start()
        started = time.monotonic()
        trial.wait_for_steps([5])
        assert time.monotonic() - started < HUNG
        np.testing.assert_array_equal(trial.tensor("w").value(5), np.full(4, 5, np.float32))
    finally:
        trial.close()


def test_requests_go_through_the_proxy_the_environment_names(
    trial: str, s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``HTTP_PROXY`` naming a proxy (and the endpoint not in ``NO_PROXY``), requests go
    through it, as botocore sends them; the answers are the same."""
    for name in ("http_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with FaultyProxy(s3_server.endpoint, rate=0.0) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.endpoint)
        storage = S3Storage(trial, endpoint_url=s3_server.endpoint, **SHORT)
        listed = run_with(storage, lambda s: collect(s, ""))
        assert run_with(storage, lambda s: s.read("b.json")) == b"[]"
    assert [(o.key, o.size) for o in listed] == [("a.json", 2), ("b.json", 2)]
    assert proxy.requests == 2


def test_the_command_gives_up_a_black_holed_endpoint_within_its_configured_deadline(
    tmp_path: Path,
) -> None:
    """The command on an S3 trial behind a black-holed endpoint, with
    EVALUATOR_S3_REQUEST_DEADLINE=2: exit 2 with a ClientError naming the endpoint, well
    before the default minute (the trial options reach the S3 client)."""
    from tests.support.evaluator_cli import EvaluatorCli

    cli = EvaluatorCli(tmp_path)
    with BlackHole() as hole:
        started = time.monotonic()
        run = cli(
            "--trial-dir",
            "s3://no-answer/job/debug-output",
            "--rule",
            "VanishingGradient",
            env={
                "AWS_ENDPOINT_URL": hole.endpoint,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "EVALUATOR_S3_REQUEST_DEADLINE": "2",
                "EVALUATOR_S3_READ_TIMEOUT": "0.5",
            },
            timeout=50,
        )
        seconds = time.monotonic() - started
    assert run.returncode == 2, run.describe()
    assert run.message is not None and hole.endpoint in run.message
    assert seconds < 40, f"took {seconds:.1f} s"


@pytest.mark.parametrize("operation", ["read", "list"])
def test_a_trickling_answer_is_ended_by_the_request_deadline(
    trial: str, operation: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A body or listing that trickles a byte every 0.1 s (never a 0.3 s read timeout) is
    ended by the 1 s request deadline, with a warning naming the deadline's option."""
    calls = {"read": lambda s: s.read("a.json"), "list": lambda s: collect(s, "")}
    caplog.set_level(logging.WARNING)
    with Trickle() as trickle:
        storage = S3Storage(trial, endpoint_url=trickle.endpoint, **SHORT)
        error, seconds = _timed_failure(storage, calls[operation])
    assert seconds < HUNG
    assert "cannot reach S3" in str(error) or "request deadline" in str(error)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("s3_request_deadline" in w and trial in w for w in warnings), warnings
