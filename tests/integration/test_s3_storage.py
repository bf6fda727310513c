"""S3 backend against a moto server on 127.0.0.1, directly and through a fault-injecting proxy."""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.retries.standard import ExponentialBackoff

from evaluator.errors import AccessDenied, BucketNotFound, StorageError
from evaluator.storage import S3Storage
from tests.conftest import TEST_CREDENTIALS
from tests.support import collect, run_with
from tests.support.faulty_proxy import FAULT_KINDS, FaultyProxy
from tests.support.s3server import MotoS3

StartProxy = Callable[..., FaultyProxy]
DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens there

# Two listing pages (moto takes about a second per thousand keys listed, so no more than that).
INDEX = {
    f"index/{i // 1000:09d}/{i:012d}_worker_0.json": f'{{"step": {i}}}'.encode()
    for i in range(1001)
}
EVENTS = {f"events/{s:012d}/{s:012d}_worker_0.tfevents": os.urandom(3000 + s) for s in range(40)}


@pytest.fixture
def trial(s3_server: MotoS3, s3_bucket: str) -> str:
    """A trial of 1001 index files and 40 event files; returns its URI."""
    s3_server.put_objects(s3_bucket, {**INDEX, **EVENTS}, prefix="jobs/run/")
    return f"s3://{s3_bucket}/jobs/run"


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore waits up to 1, 2, 4 ... s between attempts; the tests check retries, not waits."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.01)


@pytest.fixture
def start_proxy(
    s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch, quick_backoff: None
) -> Iterator[StartProxy]:
    """Starts a ``FaultyProxy`` in front of moto and points ``AWS_ENDPOINT_URL`` at it."""
    proxies: list[FaultyProxy] = []

    def start(**options: Any) -> FaultyProxy:
        proxy = FaultyProxy(s3_server.endpoint, **options).start()
        proxies.append(proxy)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        return proxy

    yield start
    for proxy in proxies:
        proxy.stop()


async def _bounded(jobs: list[Any], limit: int = 16) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(job: Any) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(job) for job in jobs))


async def _everything(storage: S3Storage) -> tuple[list[tuple[str, int]], list[bytes], list[bytes]]:
    """A listing, every event file whole and a range of each: what the fault tests compare."""
    listing = [(info.key, info.size) for info in await collect(storage, "index/")]
    reads = await _bounded([storage.read(key) for key in EVENTS])
    ranges = await _bounded([storage.read_range(key, 100, 2100) for key in EVENTS])
    return listing, reads, ranges


# What a fault-free run returns (the contract tests hold every backend to the stored objects).
FAULT_FREE = (
    [(key, len(INDEX[key])) for key in sorted(INDEX)],
    list(EVENTS.values()),
    [data[100:2100] for data in EVENTS.values()],
)


def test_results_through_faults_equal_the_fault_free_results(
    trial: str, start_proxy: StartProxy
) -> None:
    """With 503s, 500s, resets and truncated bodies injected, nothing is lost or changed."""
    proxy = start_proxy(rate=0.3, seed=7)
    storage = S3Storage(trial, count_requests=True)
    assert run_with(storage, _everything) == FAULT_FREE
    assert set(proxy.injected) == set(FAULT_KINDS), proxy.injected
    # aiohttp may resend an idempotent request on a reset pooled connection without botocore
    # knowing, so the proxy can see a few more requests than botocore sent.
    assert proxy.requests >= sum(storage.request_counts.values()) > 2 + 2 * len(EVENTS)


def test_adaptive_retry_mode_also_recovers(trial: str, start_proxy: StartProxy) -> None:
    """The adaptive retry mode rides out throttling too (one throttle: it then slows the client)."""
    proxy = start_proxy(rate=1.0, max_faults=1, kinds=["slowdown"])
    keys = list(EVENTS)[:3]
    reads = run_with(
        S3Storage(trial, retry_mode="adaptive"), lambda s: _bounded([s.read(k) for k in keys])
    )
    assert reads == [EVENTS[key] for key in keys]
    assert proxy.injected["slowdown"] > 0


def test_a_body_cut_off_mid_read_is_fetched_again(trial: str, start_proxy: StartProxy) -> None:
    """Truncated bodies, invisible to botocore, are retried by the storage layer."""
    proxy = start_proxy(rate=0.5, seed=1, kinds=["truncate"])
    storage = S3Storage(trial, count_requests=True)
    reads = run_with(storage, lambda s: _bounded([s.read(key) for key in EVENTS]))
    assert reads == list(EVENTS.values())
    assert proxy.injected["truncate"] > 0
    assert storage.request_counts["GetObject"] == len(EVENTS) + proxy.injected["truncate"]


def test_body_retries_are_bounded(trial: str, start_proxy: StartProxy) -> None:
    """A body that always breaks fails after ``body_retries + 1`` requests with a clear error."""
    start_proxy(rate=1.0, kinds=["truncate"], max_in_a_row=None)
    storage = S3Storage(trial, body_retries=2, count_requests=True)
    key = next(iter(EVENTS))
    with pytest.raises(StorageError, match="failed 3 times while the data was arriving") as error:
        run_with(storage, lambda s: s.read(key))
    assert key in str(error.value)
    assert storage.request_counts["GetObject"] == 3


def test_server_errors_are_retried_up_to_max_attempts(trial: str, start_proxy: StartProxy) -> None:
    """A server that always answers 500 costs exactly ``max_attempts`` requests, then fails."""
    start_proxy(rate=1.0, kinds=["internal"], max_in_a_row=None)
    storage = S3Storage(trial, max_attempts=3, count_requests=True)
    with pytest.raises(StorageError, match="InternalError"):
        run_with(storage, lambda s: collect(s, "index/"))
    assert storage.request_counts == {"ListObjectsV2": 3}


def test_ranges_are_sent_as_inclusive_byte_ranges(trial: str, start_proxy: StartProxy) -> None:
    """``read_range(key, 100, 2100)`` asks S3 for ``bytes=100-2099``."""
    proxy = start_proxy(rate=0.0)
    key = next(iter(EVENTS))
    assert (
        run_with(S3Storage(trial), lambda s: s.read_range(key, 100, 2100)) == EVENTS[key][100:2100]
    )
    assert proxy.ranges == ["bytes=100-2099"]


def test_request_counts_show_an_idle_poll_costs_one_list(trial: str) -> None:
    """Listing nothing new is one LIST; a 1001-key listing is two; a read is one GET."""
    storage = S3Storage(trial, count_requests=True)
    last = max(INDEX)

    async def body(s: S3Storage) -> None:
        assert await collect(s, "index/", last) == []
        assert s.request_counts == {"ListObjectsV2": 1}
        assert len(await collect(s, "index/")) == len(INDEX)
        await s.read(last)
        await s.exists(last)

    run_with(storage, body)
    assert storage.request_counts == {"ListObjectsV2": 3, "GetObject": 1, "HeadObject": 1}


def test_the_client_is_created_lazily(trial: str) -> None:
    """Constructing needs no event loop and sends nothing; the first call opens the client."""
    storage = S3Storage(trial, count_requests=True)
    assert storage.request_counts == {}
    assert run_with(storage, lambda s: s.exists(next(iter(INDEX)))) is True


def test_the_service_specific_endpoint_variable_wins(
    trial: str, monkeypatch: pytest.MonkeyPatch, s3_server: MotoS3
) -> None:
    """``AWS_ENDPOINT_URL_S3`` takes precedence over ``AWS_ENDPOINT_URL``, as botocore defines."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    assert len(run_with(S3Storage(trial), lambda s: collect(s, "index/000000001/"))) == 1


def test_access_denied_names_the_uri_and_the_permission(
    trial: str, start_proxy: StartProxy
) -> None:
    """A 403 on a listing asks for s3:ListBucket; on a read, for s3:GetObject; both name the URI."""
    start_proxy(deny=True)
    key = next(iter(INDEX))
    with pytest.raises(AccessDenied, match="s3:ListBucket") as listing:
        run_with(S3Storage(trial), lambda s: collect(s, "index/"))
    assert f"{trial}/index/" in str(listing.value)
    with pytest.raises(AccessDenied, match="s3:GetObject") as reading:
        run_with(S3Storage(trial), lambda s: s.read(key))
    assert f"{trial}/{key}" in str(reading.value)


@pytest.mark.parametrize("operation", ["list", "read"])
def test_a_missing_bucket_is_named(s3_server: MotoS3, operation: str) -> None:
    """Listing or reading in a bucket that does not exist raises ``BucketNotFound`` naming it."""
    storage = S3Storage("s3://no-such-bucket-here/trial")

    async def body(s: S3Storage) -> Any:
        return await (collect(s, "index/") if operation == "list" else s.read("index/x.json"))

    with pytest.raises(BucketNotFound, match="no-such-bucket-here"):
        run_with(storage, body)


def test_missing_credentials_say_how_to_provide_them(
    trial: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no credentials anywhere, the error explains the ways to provide them."""
    for name in TEST_CREDENTIALS:
        monkeypatch.delenv(name)
    with pytest.raises(StorageError, match="AWS_ACCESS_KEY_ID") as error:
        run_with(S3Storage(trial), lambda s: collect(s, "index/"))
    assert trial in str(error.value)


def test_an_unreachable_endpoint_is_a_storage_error(
    trial: str, monkeypatch: pytest.MonkeyPatch, quick_backoff: None
) -> None:
    """Nothing listening at the endpoint fails, after botocore's retries, with the URI named."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
    with pytest.raises(StorageError, match="cannot reach S3") as error:
        run_with(S3Storage(trial, max_attempts=2), lambda s: s.read("index/x.json"))
    assert trial in str(error.value)


def _failures(
    trial: str, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> list[BaseException]:
    """One exception from each way a request can fail."""
    attempts: list[tuple[S3Storage, Callable[[S3Storage], Any]]] = [
        (S3Storage(trial), lambda s: s.read("missing.json")),
        (S3Storage("s3://no-such-bucket-here/x"), lambda s: collect(s, "")),
    ]
    caught: list[BaseException] = []
    for storage, body in attempts:
        with pytest.raises(StorageError) as error:
            run_with(storage, body)
        caught.append(error.value)
    start_proxy(deny=True)
    with pytest.raises(StorageError) as denied:
        run_with(S3Storage(trial), lambda s: collect(s, ""))
    start_proxy(rate=1.0, kinds=["truncate"], max_in_a_row=None)
    with pytest.raises(StorageError) as cut:
        run_with(S3Storage(trial, body_retries=1), lambda s: s.read(next(iter(EVENTS))))
    monkeypatch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
    with pytest.raises(StorageError) as unreachable:
        run_with(S3Storage(trial, max_attempts=1), lambda s: s.read("x"))
    return [*caught, denied.value, cut.value, unreachable.value]


def test_credentials_never_appear_in_errors_or_logs(
    trial: str,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No access key, secret or session token in any message, traceback or log line we produce."""
    caplog.set_level(logging.INFO)  # botocore's DEBUG lines carry headers: keep them off
    caplog.set_level(logging.DEBUG, logger="evaluator")
    failures = _failures(trial, start_proxy, monkeypatch)
    texts = [caplog.text]
    for failure in failures:
        texts += [str(failure), repr(failure), "".join(traceback.format_exception(failure))]
    for secret in TEST_CREDENTIALS.values():
        assert not [text for text in texts if secret in text]


def test_a_looping_continuation_token_ends_the_listing_with_a_storage_error(
    trial: str, start_proxy: StartProxy
) -> None:
    """An endpoint that sends the same continuation token again (every page the first one):
    the listing stops at the first key that goes back, with a StorageError naming the
    listing and the endpoint (before: 9,930 requests in 400 s, never ending; here the
    30 s wait_for would end it with TimeoutError)."""
    proxy = start_proxy(rate=0.0, loop_listings=True)
    storage = S3Storage(trial)

    async def listing() -> list[Any]:
        return await asyncio.wait_for(collect(storage, "events/"), 30)

    with pytest.raises(StorageError, match="repeats a continuation token") as caught:
        run_with(storage, lambda s: listing())
    assert f"{trial}/events/" in str(caught.value) and proxy.endpoint in str(caught.value)
    # obstore gathers pages into chunks of 1000 keys: the repeat is seen in the first chunk
    assert proxy.listings <= 1000 // len(EVENTS) + 1
