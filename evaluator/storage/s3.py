"""S3 storage on aiobotocore.

Every request goes through ``S3Storage._call``, the one choke point that retries and translates:

* botocore's own retry modes (``standard`` or ``adaptive``, ``max_attempts`` in total) handle
  throttling (``SlowDown``), 5xx answers and connections that fail before a response arrives;
* a response body that breaks while it is being read (connection reset, fewer bytes than
  announced, read timeout) is invisible to botocore, so ``_call`` repeats the whole request, at
  most ``body_retries`` more times with jittered exponential backoff;
* botocore and S3 errors become ``ObjectNotFound``, ``AccessDenied`` (naming the URI and the
  permission to grant), ``BucketNotFound`` or ``StorageError``, keeping ``__cause__``. Messages
  name URIs, error codes and environment variable names, never credential values.

The endpoint, region and credentials come from botocore's default chain (``AWS_ENDPOINT_URL``,
``AWS_ENDPOINT_URL_S3``, ``AWS_REGION``, profiles, instance and task roles). The client is
created lazily, inside the event loop that first uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.loaders import Loader, create_loader

from evaluator.errors import AccessDenied, BucketNotFound, ObjectNotFound, StorageError
from evaluator.storage.base import ObjectInfo

__all__ = ["S3Storage"]

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # ListObjectsV2's maximum

# Failures while streaming a body that botocore has already handed over as a success.
_BODY_ERRORS = (
    ResponseStreamingError,
    IncompleteReadError,
    ReadTimeoutError,
    aiohttp.ClientPayloadError,
    aiohttp.ClientConnectionError,
)
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


class _RangeNotSatisfiable(StorageError):
    """S3's 416: the range starts at or after the object's end (or the object is empty)."""


class S3Storage:
    """A ``Storage`` over ``s3://bucket/prefix``.

    ``count_requests=True`` counts every attempt botocore sends, retries included, by operation
    name (``"ListObjectsV2"``, ``"GetObject"``, ``"HeadObject"``) in ``request_counts``.

    The client belongs to the event loop that first uses it; ``aclose`` there releases it, and a
    later call (on any loop) opens a new one.
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
        read_timeout: float = 60.0,
        endpoint_url: str | None = None,
        count_requests: bool = False,
    ) -> None:
        self._uri = uri
        self._bucket, self._root = _parse(uri)
        self._config = AioConfig(
            retries={"mode": retry_mode, "total_max_attempts": max_attempts},
            max_pool_connections=max_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self._endpoint_url = endpoint_url
        self._body_retries = body_retries
        self._count_requests = count_requests
        self.request_counts: Counter[str] = Counter()
        self._client: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._opening: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def uri(self) -> str:
        return self._uri

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        params: dict[str, Any] = {"Prefix": self._root + prefix, "MaxKeys": PAGE_SIZE}
        if start_after:
            params["StartAfter"] = self._root + start_after
        target = self._s3_uri(prefix)
        while True:
            page = await self._call("list_objects_v2", target, "s3:ListBucket", params)
            for item in page.get("Contents", ()):
                yield ObjectInfo(item["Key"][len(self._root) :], item["Size"])
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token or token == params.get("ContinuationToken"):
                return
            params["ContinuationToken"] = token

    async def read(self, key: str) -> bytes:
        data, _ = await self._get_object(key, {})
        return data

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0:
            raise ValueError(f"negative start {start} reading {key!r}")
        if start >= end:
            return b""
        # The one place where a half-open [start, end) becomes S3's inclusive byte range.
        try:
            data, response = await self._get_object(key, {"Range": f"bytes={start}-{end - 1}"})
        except _RangeNotSatisfiable:
            return b""
        if "ContentRange" not in response:  # a server that ignored Range sent the whole object
            return data[start:end]
        return data

    async def exists(self, key: str) -> bool:
        try:
            await self._call(
                "head_object", self._s3_uri(key), "s3:GetObject", {"Key": self._root + key}
            )
        except ObjectNotFound:
            return False
        return True

    async def aclose(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        self._opening = self._loop = None
        if stack is not None:
            await stack.aclose()

    async def _get_object(self, key: str, extra: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        params = {"Key": self._root + key, **extra}
        response = await self._call("get_object", self._s3_uri(key), "s3:GetObject", params)
        data: bytes = response.pop("Body")
        return data, response

    async def _call(
        self, operation: str, target: str, permission: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Send one request (botocore retries it), read its body (we retry that), translate."""
        for attempt in range(self._body_retries + 1):
            response = await self._send(operation, target, permission, params)
            if "Body" not in response:
                return response
            try:
                async with response["Body"] as body:
                    return {**response, "Body": await body.read()}
            except _BODY_ERRORS as error:
                failure = error
                log.warning(
                    "s3 body read broke, retrying",
                    extra={"uri": target, "attempt": attempt + 1, "error": type(error).__name__},
                )
                await asyncio.sleep(_backoff(attempt))
        raise StorageError(
            f"reading {target} failed {self._body_retries + 1} times while the data was "
            f"arriving ({type(failure).__name__}); check the network path to S3",
            uri=target,
        ) from failure

    async def _send(
        self, operation: str, target: str, permission: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            client = await self._get_client()
            response: dict[str, Any] = await getattr(client, operation)(
                Bucket=self._bucket, **params
            )
            return response
        except (BotoCoreError, ClientError) as error:
            raise _translate(error, target, self._bucket, permission) from error

    async def _get_client(self) -> Any:
        if self._client is not None and self._loop is not asyncio.get_running_loop():
            # aiohttp's connections cannot move between loops; failing here beats a hang there.
            raise RuntimeError(f"S3Storage for {self._uri} is in use on another event loop")
        if self._client is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:  # concurrent first calls must not open two clients
                if self._client is None:
                    await self._open()
        return self._client

    async def _open(self) -> None:
        stack = contextlib.AsyncExitStack()
        session = get_session()
        # A fresh session reads credentials and settings anew; the parsed service models, the
        # slow part of creating a client (about 0.25 s), are shared between sessions.
        session.register_component("data_loader", _shared_loader())
        creating = session.create_client("s3", config=self._config, endpoint_url=self._endpoint_url)
        client = await stack.enter_async_context(creating)
        if self._count_requests:
            # before-send fires once per HTTP attempt, so retries are counted too.
            client.meta.events.register("before-send.s3", self._count)
        self._client, self._stack = client, stack
        self._loop = asyncio.get_running_loop()

    def _count(self, event_name: str, **_: Any) -> None:
        self.request_counts[event_name.rsplit(".", 1)[-1]] += 1

    def _s3_uri(self, key: str) -> str:
        return f"s3://{self._bucket}/{self._root}{key}"


@functools.cache
def _shared_loader() -> Loader:
    return create_loader()


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
