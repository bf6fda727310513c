"""S3 storage: retries, deadlines, outages and error translation around ``s3_client``'s requests.

Every request goes through ``S3Storage._call``, the one choke point:

* **retries** follow the AWS SDKs' standard rules (``s3_retry``): throttling (``SlowDown``),
  5xx answers and requests that got no answer are sent again after a jittered exponential
  back-off, ``max_attempts`` in all, within a retry quota; ``retry_mode="adaptive"`` adds a
  client-side rate limit after a throttle;
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
  wrong or unreachable: its requests get ``FIRST_CONTACT_DEADLINE`` (3 s) at most, and the
  error says which endpoint failed, why, and (``s3_reach``) what a loopback one means in a
  container;
* a **body** that breaks while it is read (connection reset, fewer bytes than announced, read
  timeout) is fetched again, at most ``body_retries`` more times;
* a **region redirect** (a bucket in another region than the one configured) is followed once:
  the request is sent again to the bucket's region;
* **errors** become ``ObjectNotFound``, ``AccessDenied`` (naming the URI and the permission to
  grant), ``BucketNotFound`` or ``StorageError`` (``s3_errors``). Messages name URIs, error
  codes and environment variable names, never credential values.

The endpoint, region and credentials come from botocore's default chain (``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_S3``, ``AWS_REGION``, profiles, instance and task roles, web identity); see
``s3_client``. The client is created lazily, on first use.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator

from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from evaluator.errors import ObjectNotFound, StorageError
from evaluator.storage.base import ObjectInfo
from evaluator.storage.s3_answers import Reply, UnreadableKey
from evaluator.storage.s3_client import BodyBroken, ListCursor, S3Client
from evaluator.storage.s3_errors import RangeNotSatisfiable, client_error, listing_went_back
from evaluator.storage.s3_errors import translate as _translate
from evaluator.storage.s3_outage import Outage, Unanswered
from evaluator.storage.s3_reach import FIRST_CONTACT_DEADLINE, READ_TIMEOUT, unreachable_error
from evaluator.storage.s3_retry import RetryRules
from evaluator.storage.s3_scheme import S3_SCHEME

__all__ = ["S3Storage"]

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # ListObjectsV2's maximum
_REDIRECTS = {301, 307, 400}  # the bucket lives in another region (when S3 says which)
_REDIRECT_CODES = {"PermanentRedirect", "TemporaryRedirect", "AuthorizationHeaderMalformed"}
_OPERATIONS = {"get": "GetObject", "head": "HeadObject", "list": "ListObjectsV2"}


class _Request:
    """One logical request: what ``_call`` sends, counts, names and translates."""

    __slots__ = ("kind", "key", "span", "cursor", "operation", "target", "permission")

    def __init__(
        self,
        kind: str,
        target: str,
        permission: str,
        *,
        key: str = "",
        span: tuple[int, int] | None = None,
        cursor: ListCursor | None = None,
    ) -> None:
        self.kind, self.target, self.permission = kind, target, permission
        self.key, self.span, self.cursor = key, span, cursor
        self.operation = _OPERATIONS[kind]


class S3Storage:
    """A ``Storage`` over ``s3://bucket/prefix``.

    ``retry_mode`` is ``"standard"`` or ``"adaptive"`` (``"legacy"`` is taken as standard);
    ``max_attempts``, ``body_retries``, the timeouts, ``request_deadline`` and the outage
    settings are described in the module's docstring, with their defaults. ``endpoint_url``
    overrides the endpoint botocore would choose (``AWS_ENDPOINT_URL[_S3]`` do the same).

    ``count_requests=True`` counts every attempt sent, retries included, by operation name
    (``"ListObjectsV2"``, ``"GetObject"``, ``"HeadObject"``; ``"HeadBucket"`` for the question
    a region redirect may need) in ``request_counts``.

    The client (obstore's store, its connections in obstore's own threads) opens on first use,
    from any event loop; ``aclose`` drops it, and a later call opens a new one.
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
        read_timeout: float = READ_TIMEOUT,
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
        self._max_attempts = max(1, max_attempts)
        self._body_retries = body_retries
        self._max_connections = max_connections
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._deadline = request_deadline
        self._outage = Outage(outage_tolerance, outage_log_interval, log)
        self._endpoint_url = endpoint_url
        self._count_requests = count_requests
        self.request_counts: Counter[str] = Counter()
        self._rules = RetryRules(retry_mode, self._max_attempts)
        self._client: S3Client | None = None
        self._opening = threading.Lock()
        self._answered = False  # the endpoint has answered once: later silence is an outage

    @property
    def uri(self) -> str:
        return self._uri

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        # Keys outside the prefix that obstore's folder listing brings are dropped here.
        full = self._root + prefix
        after = self._root + start_after if start_after else None
        cursor = ListCursor.below(full, after)
        request = _Request("list", self._s3_uri(prefix), "s3:ListBucket", cursor=cursor)
        skip = len(self._root)
        last: str | None = None  # the key before
        while True:
            page = (await self._call(request)).listing
            if cursor.done:
                return
            for item in page:
                if last is not None and item.key <= last:
                    raise listing_went_back(self._s3_uri(prefix), self._client, last, item.key)
                last = item.key
                if item.key.startswith(full) and (after is None or item.key > after):
                    yield ObjectInfo(item.key[skip:], item.size)
                elif item.key > full and not item.key.startswith(full):
                    return  # keys come in order: the prefix is behind us
            if page:
                cursor.offset = page[-1].key  # where a new stream starts if the next page fails

    async def read(self, key: str) -> bytes:
        return (await self._get(key, None)).body

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0:
            raise ValueError(f"negative start {start} reading {key!r}")
        if start >= end:
            return b""
        try:
            return (await self._get(key, (start, end))).body
        except RangeNotSatisfiable:
            return b""

    async def exists(self, key: str) -> bool:
        try:
            await self._call(_Request("head", self._s3_uri(key), "s3:GetObject", key=key))
        except ObjectNotFound:
            return False
        return True

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _get(self, key: str, span: tuple[int, int] | None) -> Reply:
        request = _Request("get", self._s3_uri(key), "s3:GetObject", key=key, span=span)
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
            except Unanswered as failure:
                if not self._answered or self._outage.tolerance <= 0:
                    raise self._unreachable(request, failure) from failure.error
                endpoint = self._client.endpoint if self._client else "S3"
                await self._outage.wait_out(endpoint, request.target, failure)
                continue
            except (BotoCoreError, ClientError) as error:
                raise _translate(error, request.target, self._bucket, request.permission) from error
            except UnreadableKey as error:
                raise StorageError(
                    f"S3 lists the key {error} under {self._uri}, which cannot be read (a key "
                    "with an empty, '.' or '..' path segment): move or rename it",
                    uri=request.target,
                ) from None
            self._answered = True
            self._outage.answered(self._client.endpoint if self._client else self._uri)
            if not reply.ok:
                answer = client_error(reply, request.operation, 0)
                raise _translate(
                    answer, request.target, self._bucket, request.permission
                ) from answer
            return reply

    async def _attempts(self, request: _Request) -> Reply:
        """Send ``request`` until an answer the retry rules do not retry: a success or a final
        error answer. Raises ``Unanswered`` when the attempts or the deadline ran out."""
        client = await self._get_client()
        rules = self._rules
        started = time.monotonic()
        # Until the endpoint has sent any answer, a short budget: it is wrong or unreachable.
        first_contact = min(self._deadline, FIRST_CONTACT_DEADLINE)
        deadline = self._deadline if self._answered else first_contact
        attempt, redirected, spent = 0, False, 0
        while True:
            attempt += 1
            remaining = deadline - (time.monotonic() - started)
            whole = attempt == 1 and self._answered  # the full deadline, as obstore's timeout
            reply, caught = await self._attempt(client, request, remaining, whole)
            if reply is not None:
                deadline = self._deadline  # it answers (throttling, 5xx): not unreachable
                if not redirected and await self._redirect(client, reply):
                    redirected = True  # a region redirect: once, not a retry
                    continue
            status = None if reply is None else reply.status
            code = "" if reply is None else reply.code
            if rules.limiter is not None and reply is not None:
                rules.limiter.after_answer(rules.throttled(status, code))
            if reply is not None and (reply.ok or not rules.retryable(status, code)):
                if reply.ok:
                    rules.release(spent)
                return reply  # a success or a final error answer
            elapsed = time.monotonic() - started
            delay = rules.delay(attempt, rules.throttled(status, code))
            cost = 0
            if attempt < rules.max_attempts and elapsed + delay < deadline:
                cost = rules.acquire(isinstance(caught, ReadTimeoutError))
            if not cost:
                error = caught or client_error(reply, request.operation, attempt - 1)
                raise Unanswered(error, attempt, elapsed)
            spent += cost
            await asyncio.sleep(delay)

    async def _redirect(self, client: S3Client, reply: Reply) -> bool:
        """Whether ``reply`` sent the bucket to another region, the client now retargeted."""
        if reply.status not in _REDIRECTS or reply.code not in _REDIRECT_CODES:
            return False
        region = reply.region
        if region is None:  # the answer did not say: ask S3 where the bucket is
            if self._count_requests:
                self.request_counts["HeadBucket"] += 1
            region = await client.bucket_region(self._connect_timeout + self._read_timeout)
        if not region or region == client.region:
            return False
        await asyncio.to_thread(client.retarget, region)
        return True

    async def _attempt(
        self, client: S3Client, request: _Request, remaining: float, whole: bool
    ) -> tuple[Reply | None, BotoCoreError | None]:
        """One attempt: an answer, or the botocore error of no answer. An attempt with the
        ``whole`` request deadline is bounded by obstore's own timeout (the common path: no
        timer here); a shorter one by ``asyncio.wait_for``."""
        if self._rules.limiter is not None:
            await self._rules.limiter.before_send()
        cursor = request.cursor
        if self._count_requests and (cursor is None or cursor.stream is None or cursor.full):
            self.request_counts[request.operation] += 1  # a page after a full one: a request
        if request.kind == "get":
            sent = client.get(self._root + request.key, request.span)
        elif request.kind == "head":
            sent = client.head(self._root + request.key)
        else:
            assert cursor is not None
            sent = client.list_next(cursor)
        budget = max(remaining, 0.05)
        started = time.monotonic()
        try:
            # The read timeout bounds each wait for bytes; this bounds the whole answer, which
            # a server trickling one byte at a time would otherwise draw out for ever.
            return await (sent if whole else asyncio.wait_for(sent, budget)), None
        except BotoCoreError as error:
            # obstore's own whole-request timeout (the deadline) may end it first
            if time.monotonic() - started < min(budget, self._deadline) * 0.99:
                return None, error
        except TimeoutError:
            pass
        endpoint = client.endpoint
        if budget >= self._connect_timeout + self._read_timeout:
            log.warning(
                "S3 at %s: the answer to %s did not arrive whole within the request "
                "deadline of %g s (s3_request_deadline; bytes kept coming, too slowly)",
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

    def _unreachable(self, request: _Request, failure: Unanswered) -> StorageError:
        """The error of a request that used up its budget against an endpoint that never
        answered: what was tried, for how long, and where."""
        return unreachable_error(
            _translate(failure.error, request.target, self._bucket, request.permission),
            failure,
            self._client.endpoint if self._client else "S3",
            request.target,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_attempts=self._max_attempts,
            deadline=self._deadline,
        )

    async def _get_client(self) -> S3Client:
        if self._client is None:
            try:
                # botocore's models and credential chain: a fraction of a second, off the loop.
                await asyncio.to_thread(self._open_once)
            except (BotoCoreError, ClientError) as error:
                raise _translate(error, self._uri, self._bucket, "s3:ListBucket") from error
        assert self._client is not None
        return self._client

    def _open_once(self) -> None:
        """Open the client unless a concurrent first call did (one thread opens, the others
        wait for it). obstore's store is bound to no event loop: any loop may use it."""
        with self._opening:
            if self._client is None:
                self._client = S3Client.open(
                    self._bucket,
                    endpoint_url=self._endpoint_url,
                    max_connections=self._max_connections,
                    connect_timeout=self._connect_timeout,
                    read_timeout=self._read_timeout,
                    request_deadline=self._deadline,
                )

    def _s3_uri(self, key: str) -> str:
        return f"{S3_SCHEME.prefix}{self._bucket}/{self._root}{key}"


def _parse(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> ``("bucket", "a/b/")``; ``s3://bucket`` -> ``("bucket", "")``."""
    if not uri.startswith(S3_SCHEME.prefix):
        raise StorageError(f"{uri!r} is not an {S3_SCHEME.prefix} URI", uri=uri)
    bucket, _, prefix = uri.removeprefix(S3_SCHEME.prefix).partition("/")
    if not bucket:
        raise StorageError(f"{uri!r} names no bucket: use {S3_SCHEME.example}", uri=uri)
    prefix = prefix.rstrip("/")
    return bucket, f"{prefix}/" if prefix else ""


def _backoff(attempt: int) -> float:
    """Full-jitter exponential backoff: up to 0.1 s, 0.2 s, 0.4 s ... capped at 5 s."""
    return random.uniform(0, min(5.0, 0.1 * 2**attempt))
