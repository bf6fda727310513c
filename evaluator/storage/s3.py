"""S3 storage: retries, deadlines and error translation around ``s3_wire``'s lean requests.

Every request goes through ``S3Storage._call``, the one choke point:

* **retries** follow botocore's standard rules, with botocore's own classes: throttling
  (``SlowDown``), 5xx answers and requests that got no answer are sent again after botocore's
  jittered exponential back-off, ``max_attempts`` in all, within botocore's retry quota;
  ``retry_mode="adaptive"`` adds botocore's client-side rate limiter after a throttle;
* **deadlines**: ``connect_timeout`` bounds opening a connection and ``read_timeout`` any wait
  for bytes, per attempt; ``request_deadline`` bounds all the attempts of one request, each
  attempt's whole answer included (a body or listing trickling in a byte at a time is cut off
  there, with a warning naming ``s3_request_deadline``, and counts as a read timeout). An
  endpoint that accepts connections and never answers is given up after about a minute with the
  defaults (10 s, 20 s, 60 s), in a message naming the endpoint, the attempts and the time;
* **outages**: once the endpoint has answered, a request that used up its deadline is not the
  end: the storage keeps trying, with back-off, for ``outage_tolerance`` seconds (300), and logs
  one line every ``outage_log_interval`` seconds (60) while S3 stays away, so a live run rides
  out a few minutes of outage. An endpoint that never answered is not having an outage; it is
  wrong or unreachable: its requests get ``FIRST_CONTACT_DEADLINE`` (5 s) at most, and the
  error says which endpoint failed, why, and (``s3_reach``) what a loopback one means in a
  container;
* a **body** that breaks while it is read (connection reset, fewer bytes than announced, read
  timeout) is fetched again, at most ``body_retries`` more times;
* **errors** become ``ObjectNotFound``, ``AccessDenied`` (naming the URI and the permission to
  grant), ``BucketNotFound`` or ``StorageError``, keeping ``__cause__``. Messages name URIs,
  error codes and environment variable names, never credential values.

The endpoint, region and credentials come from botocore's default chain (``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_S3``, ``AWS_REGION``, profiles, instance and task roles, web identity); see
``s3_wire``. The connection pool is created lazily, inside the event loop that first uses it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.retries.quota import RetryQuota
from botocore.retries.standard import (
    ExponentialBackoff,
    MaxAttemptsChecker,
    OrRetryChecker,
    RetryContext,
    RetryEventAdapter,
    RetryQuotaChecker,
    ThrottledRetryableChecker,
    ThrottlingErrorDetector,
    TransientRetryableChecker,
)

from evaluator.errors import AccessDenied, BucketNotFound, ObjectNotFound, StorageError
from evaluator.storage.base import ObjectInfo
from evaluator.storage.s3_reach import FIRST_CONTACT_DEADLINE, loopback_hint, unreachable_reason
from evaluator.storage.s3_wire import BodyBroken, Reply, S3Wire, Timeouts, parse_listing

__all__ = ["S3Storage"]

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # ListObjectsV2's maximum

_NOT_FOUND = {"NoSuchKey", "NotFound", "404"}
_DENIED = {"AccessDenied", "AllAccessDisabled", "Forbidden", "403"}
_BAD_CREDENTIALS = {
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "SignatureDoesNotMatch",
    "TokenRefreshRequired",
}
_NO_CREDENTIALS = (
    "no usable AWS credentials for {uri}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE, or run with an IAM role "
    "(instance profile, ECS task role, IRSA web identity)"
)
_REDIRECTS = {301, 307, 400}  # with x-amz-bucket-region: the bucket lives in another region
_OUTAGE_PAUSE_MAX = 15.0


class _RangeNotSatisfiable(StorageError):
    """S3's 416: the range starts at or after the object's end (or the object is empty)."""


class _Unanswered(Exception):
    """A request used up its attempts or its deadline without a usable answer: no answer at
    all, or only 5xx and throttling answers. ``error`` is the last botocore exception."""

    def __init__(self, error: BotoCoreError | ClientError, attempts: int, seconds: float) -> None:
        super().__init__(str(error))
        self.error, self.attempts, self.seconds = error, attempts, seconds


class _Request:
    """One logical request: what ``_call`` sends, counts, names and translates."""

    __slots__ = ("kind", "key", "range", "params", "operation", "target", "permission")

    def __init__(
        self,
        kind: str,
        target: str,
        permission: str,
        *,
        key: str = "",
        range: str | None = None,
        params: dict[str, str] | None = None,
    ) -> None:
        self.kind, self.target, self.permission = kind, target, permission
        self.key, self.range, self.params = key, range, params
        self.operation = _OPERATIONS[kind]


_OPERATIONS = {"get": "GetObject", "head": "HeadObject", "list": "ListObjectsV2"}
# botocore's retry checks look up the service through the operation model.
_OPERATION_MODELS = {
    name: SimpleNamespace(
        name=name, error_shapes=[], service_model=SimpleNamespace(service_name="s3")
    )
    for name in _OPERATIONS.values()
}


class _RetryRules:
    """botocore's standard retry mode, from its own classes: transient and throttling errors
    are retried up to ``max_attempts`` with its back-off, within its retry quota."""

    def __init__(self, mode: str, max_attempts: int) -> None:
        detector = ThrottlingErrorDetector(RetryEventAdapter())
        self.max_attempts = max_attempts
        self.checker = OrRetryChecker([TransientRetryableChecker(), ThrottledRetryableChecker()])
        self.attempts = MaxAttemptsChecker(max_attempts)
        self.backoff = ExponentialBackoff(service_name="s3", throttling_detector=detector)
        self.quota = RetryQuotaChecker(RetryQuota(), detector)
        self.limiter = _adaptive_limiter(detector) if mode == "adaptive" else None


class S3Storage:
    """A ``Storage`` over ``s3://bucket/prefix``.

    ``retry_mode`` is ``"standard"`` or ``"adaptive"`` (``"legacy"`` is taken as standard);
    ``max_attempts``, ``body_retries``, the timeouts, ``request_deadline`` and the outage
    settings are described in the module's docstring, with their defaults. ``endpoint_url``
    overrides the endpoint botocore would choose (``AWS_ENDPOINT_URL[_S3]`` do the same).

    ``count_requests=True`` counts every attempt sent, retries included, by operation name
    (``"ListObjectsV2"``, ``"GetObject"``, ``"HeadObject"``) in ``request_counts``.

    The connection pool belongs to the event loop that first uses it; ``aclose`` there releases
    it, and a later call (on any loop) opens a new one.
    """

    def __init__(
        self,
        uri: str,
        *,
        retry_mode: str = "standard",
        max_attempts: int = 10,
        body_retries: int = 3,
        max_connections: int = 64,
        connect_timeout: float = 10.0,
        read_timeout: float = 20.0,
        request_deadline: float = 60.0,
        outage_tolerance: float = 300.0,
        outage_log_interval: float = 60.0,
        endpoint_url: str | None = None,
        count_requests: bool = False,
    ) -> None:
        if retry_mode not in ("standard", "adaptive", "legacy"):
            raise StorageError(
                f"unknown S3 retry mode {retry_mode!r}: use standard or adaptive", uri=uri
            )
        self._uri = uri
        self._bucket, self._root = _parse(uri)
        self._retry_mode = retry_mode
        self._max_attempts = max(1, max_attempts)
        self._body_retries = body_retries
        self._max_connections = max_connections
        self._timeouts = Timeouts(connect=connect_timeout, read=read_timeout)
        self._deadline = request_deadline
        self._outage_tolerance = outage_tolerance
        self._outage_log_interval = outage_log_interval
        self._endpoint_url = endpoint_url
        self._count_requests = count_requests
        self.request_counts: Counter[str] = Counter()
        self._rules = _RetryRules(retry_mode, self._max_attempts)
        self._wire: S3Wire | None = None
        self._opening: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answered = False  # the endpoint has answered once: later silence is an outage
        self._outage_since: float | None = None
        self._outage_logged: float | None = None

    @property
    def uri(self) -> str:
        return self._uri

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        params = {"prefix": self._root + prefix, "max-keys": str(PAGE_SIZE)}
        if start_after:
            params["start-after"] = self._root + start_after
        request = _Request("list", self._s3_uri(prefix), "s3:ListBucket", params=params)
        skip = len(self._root)
        while True:
            page = parse_listing((await self._call(request)).body, strip=skip)
            for item in page.objects:
                yield item
            token = page.next_token
            if not token or token == params.get("continuation-token"):
                return
            params["continuation-token"] = token

    async def read(self, key: str) -> bytes:
        return (await self._get(key, None)).body

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0:
            raise ValueError(f"negative start {start} reading {key!r}")
        if start >= end:
            return b""
        # The one place where a half-open [start, end) becomes S3's inclusive byte range.
        try:
            reply = await self._get(key, f"bytes={start}-{end - 1}")
        except _RangeNotSatisfiable:
            return b""
        if "content-range" not in reply.headers:  # a server that ignored Range sent it all
            return reply.body[start:end]
        return reply.body

    async def exists(self, key: str) -> bool:
        try:
            await self._call(_Request("head", self._s3_uri(key), "s3:GetObject", key=key))
        except ObjectNotFound:
            return False
        return True

    async def aclose(self) -> None:
        wire, self._wire = self._wire, None
        self._opening = self._loop = None
        if wire is not None:
            await wire.aclose()

    async def _get(self, key: str, range_header: str | None) -> Reply:
        request = _Request("get", self._s3_uri(key), "s3:GetObject", key=key, range=range_header)
        return await self._call(request)

    async def _call(self, request: _Request) -> Reply:
        """The answer to ``request``: sent and retried, its body fetched again when it broke
        off, an outage waited out; any failure translated."""
        for attempt in range(self._body_retries + 1):
            try:
                return await self._answer(request)
            except BodyBroken as error:
                failure = error
                log.warning(
                    "s3 body read broke, retrying",
                    extra={"uri": request.target, "attempt": attempt + 1, "error": str(error)},
                )
                await asyncio.sleep(_backoff(attempt))
        raise StorageError(
            f"reading {request.target} failed {self._body_retries + 1} times while the data was "
            f"arriving ({failure}); check the network path to S3",
            uri=request.target,
        ) from failure

    async def _answer(self, request: _Request) -> Reply:
        """A usable answer to ``request``, riding out an outage of an endpoint that answered
        before; raises the translated error otherwise."""
        while True:
            try:
                reply = await self._attempts(request)
            except _Unanswered as failure:
                if not self._answered or self._outage_tolerance <= 0:
                    raise self._unreachable(request, failure) from failure.error
                await self._wait_out(request, failure)
                continue
            except (BotoCoreError, ClientError) as error:
                raise _translate(error, request.target, self._bucket, request.permission) from error
            self._answered = True
            if self._outage_since is not None:
                log.warning(
                    "S3 answers again after %.0f s: %s",
                    time.monotonic() - self._outage_since,
                    self._wire.endpoint if self._wire else self._uri,
                )
                self._outage_since = self._outage_logged = None
            if reply.parsed is not None:
                answer = ClientError(reply.parsed, request.operation)
                raise _translate(
                    answer, request.target, self._bucket, request.permission
                ) from answer
            return reply

    async def _attempts(self, request: _Request) -> Reply:
        """Send ``request`` until an answer botocore's rules do not retry: a success or a
        final error answer. Raises ``_Unanswered`` when the attempts or the deadline ran out."""
        wire = await self._get_wire()
        rules = self._rules
        started = time.monotonic()
        # Until the endpoint has sent any answer, a short budget: it is wrong or unreachable.
        first_contact = min(self._deadline, FIRST_CONTACT_DEADLINE)
        deadline = self._deadline if self._answered else first_contact
        request_context: dict[str, Any] = {}
        attempt, redirected = 0, False
        while True:
            attempt += 1
            remaining = deadline - (time.monotonic() - started)
            reply, caught = await self._attempt(wire, request, remaining)
            if reply is not None:
                deadline = self._deadline  # it answers (throttling, 5xx): not unreachable
            if (
                reply is not None
                and reply.status_code in _REDIRECTS
                and not redirected
                and (region := reply.headers.get("x-amz-bucket-region"))
                and region != wire.region
            ):
                await wire.retarget(region)  # botocore's region redirect: once, not a retry
                redirected = True
                continue
            if rules.limiter is not None:
                await rules.limiter.on_receiving_response(
                    response=None if reply is None else (reply, reply.parsed),
                    attempts=attempt,
                    operation=_OPERATION_MODELS[request.operation],
                    caught_exception=caught,
                    request_dict={"context": request_context},
                )
            if reply is not None and reply.parsed is None:
                rules.quota.release_retry_quota(request_context, reply)
                return reply
            context = RetryContext(
                attempt_number=attempt,
                operation_model=_OPERATION_MODELS[request.operation],
                parsed_response=reply.parsed if reply is not None else None,
                http_response=reply,
                caught_exception=caught,
                request_context=request_context,
            )
            if not rules.checker.is_retryable(context):
                if caught is not None:
                    raise caught
                assert reply is not None
                return reply  # a final error answer
            elapsed = time.monotonic() - started
            delay = rules.backoff.delay_amount(context)
            if (
                not rules.attempts.is_retryable(context)
                or elapsed + delay >= deadline
                or not rules.quota.acquire_retry_quota(context)
            ):
                raise _Unanswered(
                    caught or ClientError(_with_attempts(reply, attempt), request.operation),
                    attempt,
                    elapsed,
                )
            await asyncio.sleep(delay)

    async def _attempt(
        self, wire: S3Wire, request: _Request, remaining: float
    ) -> tuple[Reply | None, BotoCoreError | None]:
        """One attempt on the wire: an answer, or the botocore error of no answer."""
        timeouts = self._timeouts
        if remaining < max(timeouts.connect, timeouts.read):
            remaining = max(remaining, 0.05)
            timeouts = Timeouts(min(timeouts.connect, remaining), min(timeouts.read, remaining))
        if self._rules.limiter is not None:
            await self._rules.limiter.on_sending_request(request=None)
        if self._count_requests:
            self.request_counts[request.operation] += 1
        if request.kind == "get":
            sent = wire.get(self._root + request.key, request.range, timeouts)
        elif request.kind == "head":
            sent = wire.head(self._root + request.key, timeouts)
        else:
            assert request.params is not None
            sent = wire.list(request.params, timeouts)
        budget = max(remaining, 0.05)
        try:
            # The read timeout bounds each wait for bytes; this bounds the whole answer, which
            # a server trickling one byte at a time would otherwise draw out for ever.
            return await asyncio.wait_for(sent, budget), None
        except (BotoConnectionError, HTTPClientError) as error:
            return None, error
        except TimeoutError:
            endpoint = wire.endpoint
            log.warning(
                "S3 at %s: the answer to %s did not arrive whole within the request deadline "
                "of %g s (s3_request_deadline; bytes kept coming, too slowly)",
                endpoint,
                request.target,
                self._deadline,
            )
            late = ReadTimeoutError(
                endpoint_url=endpoint,
                error=f"the answer did not arrive whole within the {self._deadline:g} s request "
                "deadline (s3_request_deadline)",
            )
            return None, late

    async def _wait_out(self, request: _Request, failure: _Unanswered) -> None:
        """Pause during an outage, logging it at most once per ``outage_log_interval``; raise
        once it has lasted ``outage_tolerance`` seconds."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now - failure.seconds
        down_for = now - self._outage_since
        endpoint = self._wire.endpoint if self._wire else "S3"
        if down_for >= self._outage_tolerance:
            raise StorageError(
                f"S3 at {endpoint} has not answered for {down_for:.0f} s, more than the "
                f"{self._outage_tolerance:g} s an outage is waited out (reading {request.target}; "
                f"last error: {failure.error}); check S3's health and the network path",
                uri=request.target,
            ) from failure.error
        if self._outage_logged is None or now - self._outage_logged >= self._outage_log_interval:
            self._outage_logged = now
            log.warning(
                "S3 at %s: no usable answer for %.0f s (%s); retrying for up to %g s",
                endpoint,
                down_for,
                _failure_kind(failure.error),
                self._outage_tolerance,
            )
        cap = min(_OUTAGE_PAUSE_MAX, self._outage_tolerance / 10)
        pause = random.uniform(cap / 2, cap)
        await asyncio.sleep(min(pause, max(0.0, self._outage_tolerance - down_for)))

    def _unreachable(self, request: _Request, failure: _Unanswered) -> StorageError:
        """The error of a request that used up its budget against an endpoint that never
        answered: what was tried, for how long, and where."""
        error = _translate(failure.error, request.target, self._bucket, request.permission)
        endpoint = self._wire.endpoint if self._wire else "S3"
        first = min(self._deadline, FIRST_CONTACT_DEADLINE)
        if not isinstance(failure.error, ClientError):  # no answer at all: say where and why
            error = type(error)(
                f"cannot reach S3 at {endpoint} ({unreachable_reason(failure.error)}) reading "
                f"{request.target}{loopback_hint(endpoint)}",
                uri=request.target,
            )
        first_text = (
            f", {first:g} s until the endpoint first answers" if first < self._deadline else ""
        )
        budget = (
            f"gave up after {failure.attempts} attempt{'s' if failure.attempts != 1 else ''} "
            f"in {failure.seconds:.1f} s at {endpoint} (each attempt: connect timeout "
            f"{self._timeouts.connect:g} s, read timeout {self._timeouts.read:g} s; at most "
            f"{self._max_attempts} attempts within {self._deadline:g} s per request{first_text})"
            ". The endpoint comes from AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 when set, else "
            "from AWS_REGION"
        )
        return type(error)(f"{error}; {budget}", uri=request.target)

    async def _get_wire(self) -> S3Wire:
        if self._wire is not None and self._loop is not asyncio.get_running_loop():
            # aiohttp's connections cannot move between loops; failing here beats a hang there.
            raise RuntimeError(f"S3Storage for {self._uri} is in use on another event loop")
        if self._wire is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:  # concurrent first calls must not open two pools
                if self._wire is None:
                    try:
                        self._wire = await S3Wire.open(
                            self._bucket,
                            endpoint_url=self._endpoint_url,
                            max_connections=self._max_connections,
                        )
                    except (BotoCoreError, ClientError) as error:
                        raise _translate(error, self._uri, self._bucket, "s3:ListBucket") from error
                    self._loop = asyncio.get_running_loop()
        return self._wire

    def _s3_uri(self, key: str) -> str:
        return f"s3://{self._bucket}/{self._root}{key}"


def _failure_kind(error: BaseException) -> str:
    """``ReadTimeoutError``, or S3's code (``SlowDown``, ``InternalError``) for an answer."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or "error answers")
    return type(error).__name__


def _with_attempts(reply: Reply | None, attempts: int) -> dict[str, Any]:
    """The error answer as botocore reports it after its retries: with ``RetryAttempts``."""
    parsed = dict(reply.parsed or {}) if reply is not None else {}
    metadata = dict(parsed.get("ResponseMetadata", {}))
    metadata["RetryAttempts"] = attempts - 1
    parsed["ResponseMetadata"] = metadata
    return parsed


def _adaptive_limiter(detector: ThrottlingErrorDetector) -> Any:
    """botocore's adaptive client-side rate limiter, in aiobotocore's asyncio version."""
    from aiobotocore.retries import bucket
    from aiobotocore.retries.adaptive import AsyncClientRateLimiter
    from botocore.retries import throttling
    from botocore.retries.adaptive import RateClocker

    clock = bucket.Clock()
    return AsyncClientRateLimiter(
        rate_adjustor=throttling.CubicCalculator(
            starting_max_rate=0, start_time=clock.current_time()
        ),
        rate_clocker=RateClocker(clock),
        token_bucket=bucket.AsyncTokenBucket(max_rate=1, clock=clock),
        throttling_detector=detector,
        clock=clock,
    )


def _parse(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> ``("bucket", "a/b/")``; ``s3://bucket`` -> ``("bucket", "")``."""
    if not uri.startswith("s3://"):
        raise StorageError(f"{uri!r} is not an s3:// URI", uri=uri)
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise StorageError(f"{uri!r} names no bucket: use s3://bucket/prefix", uri=uri)
    prefix = prefix.rstrip("/")
    return bucket, f"{prefix}/" if prefix else ""


def _backoff(attempt: int) -> float:
    """Full-jitter exponential backoff: up to 0.1 s, 0.2 s, 0.4 s ... capped at 5 s."""
    return random.uniform(0, min(5.0, 0.1 * 2**attempt))


def _translate(error: Exception, target: str, bucket: str, permission: str) -> StorageError:
    """The storage error for a botocore failure on ``target`` (message only, no cause set)."""
    if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
        return StorageError(_NO_CREDENTIALS.format(uri=target), uri=target)
    if isinstance(error, (BotoConnectionError, HTTPClientError)):
        return StorageError(f"cannot reach S3 for {target}: {error}", uri=target)
    if not isinstance(error, ClientError):
        return StorageError(f"S3 request for {target} failed: {error}", uri=target)
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code == "NoSuchBucket":
        return BucketNotFound(f"bucket {bucket!r} does not exist (reading {target})", uri=target)
    if code in _NOT_FOUND or (status == 404 and not code):
        return ObjectNotFound(f"{target} does not exist", uri=target)
    if code == "InvalidRange":
        return _RangeNotSatisfiable(f"range not satisfiable for {target}", uri=target)
    if code in _DENIED or (status == 403 and code not in _BAD_CREDENTIALS):
        return AccessDenied(_denied_message(target, bucket, permission), uri=target)
    if code in _BAD_CREDENTIALS:
        return StorageError(
            f"S3 rejected the credentials ({code}) reading {target}: check that they are "
            "current and belong to the account that owns the bucket",
            uri=target,
        )
    message = error.response.get("Error", {}).get("Message", "")
    attempts = error.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) + 1
    return StorageError(
        f"S3 answered {code or status} for {target} ({attempts} attempts): {message}", uri=target
    )


def _denied_message(target: str, bucket: str, permission: str) -> str:
    if permission == "s3:ListBucket":
        return (
            f"access denied listing {target}: the credentials need s3:ListBucket "
            f"on arn:aws:s3:::{bucket}"
        )
    # S3 hides from callers who may not list whether a key exists: a missing key is a 403 too.
    return (
        f"access denied reading {target}: the credentials need {permission} on "
        f"arn:aws:s3:::{target.removeprefix('s3://')} (without s3:ListBucket on the bucket, "
        "S3 also answers 403 for a missing object)"
    )
