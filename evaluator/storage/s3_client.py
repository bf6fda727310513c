"""One S3 attempt on obstore (the Rust ``object_store`` crate): a ``Reply``, or botocore's
exception for a request that got no answer.

This is the transport half of the S3 backend (``s3.py`` holds the other: retries, deadlines,
outages, translation). obstore sends, signs (SigV4), pools connections, speaks to proxies and
verifies TLS; its own retries are off, so that every call here is exactly one request and
``s3.py`` decides about the next. botocore stays for what it does once per storage, through its
public API: the **credential chain** (``Session.get_credentials``: environment, profiles,
container and instance roles, web identity, SSO; refreshed before expiry), handed to obstore as
a credential provider, and **where the bucket lives** (``client.meta.endpoint_url`` and
``region_name``: ``AWS_ENDPOINT_URL[_S3]``, ``AWS_REGION``, the profile's settings, FIPS and
dual-stack endpoints), plus the **CA bundle** (``AWS_CA_BUNDLE`` or the profile's
``ca_bundle``). Proxies come from ``HTTPS_PROXY`` / ``HTTP_PROXY`` (``NO_PROXY`` honoured), as
botocore takes them.

An error answer is a ``Reply``; failures without an answer are raised as botocore's own
exceptions (``EndpointConnectionError``, ``ConnectTimeoutError``, ``ReadTimeoutError``,
``ConnectionClosedError``): ``s3_answers`` reads obstore's exceptions into one or the other. A
body that breaks after a successful head is ``BodyBroken``; ``s3.py`` fetches it again.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import botocore.session
from botocore.credentials import Credentials, RefreshableCredentials
from botocore.exceptions import NoCredentialsError

from evaluator.storage.base import ObjectInfo
from evaluator.storage.s3_answers import Reply, first_line, reply_or_raise

__all__ = ["BodyBroken", "ListCursor", "S3Client"]

_USER_AGENT = "debugger-rule-evaluator"
_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_PAGE = 1000


class BodyBroken(Exception):
    """The head of a successful answer arrived; its body broke off while being read."""


class ListCursor:
    """A listing in progress: keys below the folder ``folder`` (``""``: the whole bucket) after
    ``offset``, fetched page by page from one obstore stream. When a page fails, the next
    attempt opens a new stream after ``offset``, which the caller moves to the last key seen."""

    __slots__ = ("folder", "offset", "stream", "done", "full")

    def __init__(self, folder: str, offset: str | None) -> None:
        self.folder, self.offset = folder, offset
        self.stream: Any = None  # obstore's stream, open while pages arrive
        self.done = False
        self.full = False  # the last page held 1000 keys: the next one is another request

    @classmethod
    def below(cls, prefix: str, after: str | None) -> ListCursor:
        """The listing of keys that start with the plain string ``prefix`` and sort after
        ``after``: obstore lists below a folder, so this lists the prefix's folder from just
        before the prefix (or from ``after``), and the caller drops keys outside the prefix.
        obstore's offset is a path: a bound ending in "/" is cut back to one without (an
        earlier start; the keys between are dropped too)."""
        bounds = [b for b in (prefix[:-1] if not prefix.endswith("/") else "", after) if b]
        offset = max(bounds).rstrip("/") if bounds else ""
        return cls(prefix.rpartition("/")[0], offset or None)


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a bucket's requests go, as botocore resolves it."""

    endpoint: str  # scheme://host[:port], for messages
    bucket_url: str  # the bucket's own URL (virtual-hosted or path style)
    region: str
    virtual: bool
    ca_bundle: str | None


class S3Client:
    """GET, HEAD and ListObjectsV2 for one bucket, one request per call.

    ``open`` resolves credentials and the endpoint (a second or so of botocore's models, once);
    connections open on first use, in obstore's own threads.
    """

    def __init__(
        self,
        bucket: str,
        target: _Target,
        credentials: Credentials,
        *,
        endpoint_url: str | None,
        max_connections: int,
        connect_timeout: float,
        read_timeout: float,
        request_deadline: float,
    ) -> None:
        self._bucket = bucket
        self._target = target
        self._provider = _CredentialProvider(credentials)
        self._endpoint_url = endpoint_url
        self._options = (max_connections, connect_timeout, read_timeout, request_deadline)
        self._store = _store(bucket, target, self._provider, *self._options)

    @classmethod
    def open(
        cls,
        bucket: str,
        *,
        endpoint_url: str | None,
        max_connections: int,
        connect_timeout: float,
        read_timeout: float,
        request_deadline: float,
    ) -> S3Client:
        session = botocore.session.Session()
        credentials = session.get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        target = _resolve(session, bucket, endpoint_url, None)
        # The S3 client's models and endpoint rules (tens of thousands of objects in cycles)
        # are garbage now: collected here, once, rather than walked by the next full
        # collection of a process busy listing or reading.
        del session
        gc.collect()
        return cls(
            bucket,
            target,
            credentials,
            endpoint_url=endpoint_url,
            max_connections=max_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            request_deadline=request_deadline,
        )

    @property
    def endpoint(self) -> str:
        """``scheme://host[:port]`` of the bucket's endpoint, for messages."""
        return self._target.endpoint

    @property
    def region(self) -> str:
        return self._target.region

    def retarget(self, region: str) -> None:
        """Send later requests to the bucket's own region (S3 said where it is)."""
        self._target = _resolve(
            botocore.session.Session(), self._bucket, self._endpoint_url, region
        )
        self._store = _store(self._bucket, self._target, self._provider, *self._options)

    async def get(self, key: str, span: tuple[int, int] | None) -> Reply:
        """The object, or bytes ``[start, end)`` of it."""
        import obstore

        options: Any = {"range": span} if span is not None else None
        try:
            result = await obstore.get_async(self._store, key, options=options)
        except Exception as error:  # obstore's exceptions: an error answer or none at all
            return reply_or_raise(error, self._target.endpoint)
        try:
            body = await result.bytes_async()
        except Exception as error:
            raise BodyBroken(first_line(error)) from None
        return Reply(206 if span is not None else 200, bytes(body))

    async def head(self, key: str) -> Reply:
        import obstore

        try:
            await obstore.head_async(self._store, key)
        except Exception as error:
            return reply_or_raise(error, self._target.endpoint)
        return Reply(200)

    async def list_next(self, cursor: ListCursor) -> Reply:
        """The next page (up to 1000 keys) of ``cursor``'s listing in ``Reply.listing``; an
        empty one when the listing is complete (``cursor.done``)."""
        import obstore

        stream, cursor.stream = cursor.stream, None  # kept only if this pull succeeds
        if stream is None:
            stream = aiter(
                obstore.list(
                    self._store, cursor.folder or None, offset=cursor.offset, chunk_size=_PAGE
                )
            )
        try:
            page: Sequence[Any] = await anext(stream)
        except StopAsyncIteration:
            cursor.done = True
            return Reply(200)
        except Exception as error:
            return reply_or_raise(error, self._target.endpoint)
        cursor.stream, cursor.full = stream, len(page) >= _PAGE
        return Reply(200, listing=tuple(ObjectInfo(o["path"], o["size"]) for o in page))

    async def bucket_region(self, timeout: float) -> str | None:
        """The bucket's region as S3 tells anyone who asks (an unsigned HEAD of the bucket:
        ``x-amz-bucket-region``), for a redirect whose answer did not name it."""
        return await asyncio.to_thread(_probe_region, self._target, timeout)

    async def aclose(self) -> None:
        """obstore's connections close with the store; nothing to wait for."""


class _CredentialProvider:
    """obstore's credential provider, drawing on botocore's chain: refreshable credentials
    (roles, web identity, SSO) are asked again every minute, and refresh themselves before they
    expire; static ones every ten minutes. Nothing is logged or kept beyond the answer."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        refreshable = isinstance(credentials, RefreshableCredentials)
        self._ttl = datetime.timedelta(minutes=1 if refreshable else 10)

    def __call__(self) -> dict[str, Any]:
        frozen = self._credentials.get_frozen_credentials()
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token or None,
            "expires_at": datetime.datetime.now(datetime.timezone.utc) + self._ttl,  # noqa: UP017 (Python 3.10 too)
        }


def _store(
    bucket: str,
    target: _Target,
    provider: _CredentialProvider,
    max_connections: int,
    connect_timeout: float,
    read_timeout: float,
    request_deadline: float,
) -> Any:
    from obstore.store import S3Store

    options: dict[str, Any] = {
        "allow_http": target.endpoint.startswith("http://"),
        "connect_timeout": datetime.timedelta(seconds=connect_timeout),
        "read_timeout": datetime.timedelta(seconds=read_timeout),
        # The whole of one attempt, answer included; s3.py cuts shorter ones (retries) itself.
        "timeout": datetime.timedelta(seconds=request_deadline),
        "pool_max_idle_per_host": str(max_connections),
        "user_agent": _USER_AGENT,
    }
    proxy = _env_proxy(target.endpoint)
    if proxy:
        options["proxy_url"] = proxy
    if target.ca_bundle:
        with open(target.ca_bundle, "rb") as f:
            options["root_certificate"] = f.read()
    return S3Store(
        bucket,
        endpoint=target.bucket_url if target.virtual else target.endpoint,
        region=target.region,
        virtual_hosted_style_request=target.virtual,
        credential_provider=provider,  # type: ignore[arg-type]
        client_options=options,  # type: ignore[arg-type]
        retry_config={"max_retries": 0, "retry_timeout": datetime.timedelta(days=1)},
    )


def _resolve(
    session: botocore.session.Session, bucket: str, endpoint_url: str | None, region: str | None
) -> _Target:
    """Ask botocore where this bucket's requests go: the endpoint and region a botocore S3
    client would use (nothing is sent), and the CA bundle it would verify TLS with."""
    client = session.create_client("s3", region_name=region, endpoint_url=endpoint_url)
    try:
        url, region_name = client.meta.endpoint_url, client.meta.region_name
        style = (client.meta.config.s3 or {}).get("addressing_style", "auto")
    finally:
        client.close()
    parts = urlsplit(url)
    endpoint = f"{parts.scheme}://{parts.netloc}"
    aws = (parts.hostname or "").endswith((".amazonaws.com", ".amazonaws.com.cn"))
    virtual = style == "virtual" or (
        style == "auto" and aws and _DNS_BUCKET.fullmatch(bucket) is not None
    )
    bucket_url = f"{parts.scheme}://{bucket}.{parts.netloc}" if virtual else f"{endpoint}/{bucket}"
    ca_bundle = session.get_config_variable("ca_bundle")
    return _Target(endpoint, bucket_url, region_name or "us-east-1", virtual, ca_bundle or None)


def _env_proxy(endpoint: str) -> str | None:
    """The proxy URL for the endpoint from ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY``."""
    parts = urlsplit(endpoint)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _probe_region(target: _Target, timeout: float) -> str | None:
    url = target.bucket_url + "/"
    request = urllib.request.Request(quote(url, safe=":/"), method="HEAD")
    context = ssl.create_default_context(cafile=target.ca_bundle) if target.ca_bundle else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            region = answer.headers.get("x-amz-bucket-region")
    except urllib.error.HTTPError as answer:
        region = answer.headers.get("x-amz-bucket-region")
    except OSError:
        return None
    return str(region) if region else None
