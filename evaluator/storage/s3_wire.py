"""One S3 request on the wire: signed with SigV4, sent with aiohttp, answered as a ``Reply``.

This is the lean half of the S3 backend (``s3.py`` holds the other: retries, deadlines,
translation). botocore stays for what it does well and does once per client: resolving
credentials (``aiobotocore``'s async chain: environment, profiles, container and instance
roles, web identity) and resolving where a bucket lives (its endpoint rules, with
``AWS_ENDPOINT_URL[_S3]``, the region and the profile's S3 settings). For that second part we
ask a botocore client, once, to build a request that never leaves the process, and keep its
URL as the template every later request reuses. Per request we then pay for one SigV4
signature (the signing key is derived once a day), one aiohttp request and, for listings, one
XML parse: about a tenth of botocore's request building, hooks, signing and parsing.

Transport failures are raised as botocore's own exceptions (``EndpointConnectionError``,
``ConnectTimeoutError``, ``ReadTimeoutError``, ``ConnectionClosedError``) so that botocore's
retry conditions and our translation treat them as before. A body that breaks after a
successful head is ``BodyBroken``: botocore never saw those, and ``s3.py`` retries them itself.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_plus, urlsplit

import aiohttp
import botocore
import botocore.session
from aiobotocore.session import get_session
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.loaders import Loader, create_loader
from yarl import URL

from evaluator.storage.base import ObjectInfo

__all__ = ["BodyBroken", "Listing", "Reply", "S3Wire", "Timeouts"]

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ALGORITHM = "AWS4-HMAC-SHA256"
_USER_AGENT = "debugger-rule-evaluator"
_TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class BodyBroken(Exception):
    """The head of a successful answer arrived; its body broke off while being read."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per attempt: seconds to open a connection, and seconds a read may wait for bytes."""

    connect: float
    read: float


@dataclass(frozen=True, slots=True)
class Reply:
    """One complete HTTP answer. ``status_code`` and ``headers`` as botocore's retry checks read
    them from an ``AWSResponse``; ``parsed`` is botocore's shape of an error (``Error.Code``,
    ``Error.Message``), or ``None`` for a success."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes
    parsed: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Listing:
    """One ListObjectsV2 page."""

    objects: list[ObjectInfo]
    next_token: str | None  # None when the listing is complete


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a bucket's requests go, as botocore resolved it."""

    object_base: str  # ends with "/": the quoted key follows
    list_url: str  # the query string follows after "?"
    host: str  # the Host header, signed
    path_prefix: str  # object_base's path
    list_path: str
    region: str

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.list_url)
        return f"{parts.scheme}://{parts.netloc}"


class S3Wire:
    """Signed GET, HEAD and ListObjectsV2 requests for one bucket, over one aiohttp session.

    Create it inside the event loop that will use it (``await S3Wire.open(...)``); ``aclose``
    there. Never raises botocore's ``ClientError``: an error answer is a ``Reply`` too.
    """

    def __init__(
        self,
        bucket: str,
        target: _Target,
        credentials: Any,
        session: aiohttp.ClientSession,
        endpoint_url: str | None,
    ) -> None:
        self._bucket = bucket
        self._target = target
        self._credentials = credentials
        self._session = session
        self._endpoint_url = endpoint_url
        self._key_cache: tuple[str, str, str, bytes] | None = None
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}
        self._proxy = _env_proxy(target.endpoint)

    @classmethod
    async def open(cls, bucket: str, *, endpoint_url: str | None, max_connections: int) -> S3Wire:
        """Resolve credentials and the bucket's endpoint, and open the HTTP session."""
        credentials = await get_session().get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        target = _resolve(bucket, endpoint_url, None)
        connector = aiohttp.TCPConnector(limit=max_connections)
        session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # S3 sends objects as stored: never transform their bytes
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
            headers={"User-Agent": _USER_AGENT},
        )
        return cls(bucket, target, credentials, session, endpoint_url)

    @property
    def endpoint(self) -> str:
        """``scheme://host[:port]`` of the bucket's endpoint, for messages."""
        return self._target.endpoint

    @property
    def region(self) -> str:
        return self._target.region

    def retarget(self, region: str) -> None:
        """Send later requests to the bucket's own region (S3 said where it is)."""
        self._target = _resolve(self._bucket, self._endpoint_url, region)
        self._proxy = _env_proxy(self._target.endpoint)

    async def aclose(self) -> None:
        await self._session.close()

    async def get(self, key: str, range_header: str | None, timeouts: Timeouts) -> Reply:
        path = self._target.path_prefix + _quote_key(key)
        return await self._send(
            "GET", self._target.object_base + _quote_key(key), path, "", range_header, timeouts
        )

    async def head(self, key: str, timeouts: Timeouts) -> Reply:
        path = self._target.path_prefix + _quote_key(key)
        return await self._send(
            "HEAD", self._target.object_base + _quote_key(key), path, "", None, timeouts
        )

    async def list(self, params: Mapping[str, str], timeouts: Timeouts) -> Reply:
        """ListObjectsV2 with ``params`` (``prefix``, ``start-after``, ``continuation-token``,
        ``max-keys``); keys come URL-encoded and ``parse_listing`` decodes them."""
        query = _canonical_query({"list-type": "2", "encoding-type": "url", **params})
        return await self._send(
            "GET", f"{self._target.list_url}?{query}", self._target.list_path, query, None, timeouts
        )

    async def _send(
        self,
        method: str,
        url: str,
        path: str,
        query: str,
        range_header: str | None,
        timeouts: Timeouts,
    ) -> Reply:
        credentials = await self._credentials.get_frozen_credentials()
        headers = self._sign(credentials, method, path, query, range_header)
        try:
            response = await self._session.request(
                method,
                URL(url, encoded=True),  # sent exactly as signed
                headers=headers,
                allow_redirects=False,
                timeout=self._timeout(timeouts),
                proxy=self._proxy[0] if self._proxy else None,
                proxy_auth=self._proxy[1] if self._proxy else None,
            )
        except _TRANSPORT_ERRORS as error:
            raise _transport_error(error, url) from error
        try:
            try:
                body = await response.read()
            except _TRANSPORT_ERRORS as error:
                if response.status < 300:
                    raise BodyBroken(f"{type(error).__name__}: {error}") from error
                raise _transport_error(error, url) from error
        finally:
            response.release()
        parsed = None if response.status < 300 else _parse_error(response.status, body)
        return Reply(response.status, response.headers, body, parsed)

    def _timeout(self, timeouts: Timeouts) -> aiohttp.ClientTimeout:
        key = (timeouts.connect, timeouts.read)
        timeout = self._timeouts.get(key)
        if timeout is None:
            if len(self._timeouts) > 64:  # clamped deadlines make many: keep the map small
                self._timeouts.clear()
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=timeouts.connect, sock_read=timeouts.read
            )
            self._timeouts[key] = timeout
        return timeout

    def _sign(
        self, credentials: Any, method: str, path: str, query: str, range_header: str | None
    ) -> dict[str, str]:
        """SigV4 headers for a request without a body (S3's header-based authentication)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        day, region = stamp[:8], self._target.region
        headers = {
            "host": self._target.host,
            "x-amz-content-sha256": EMPTY_SHA256,
            "x-amz-date": stamp,
        }
        if range_header is not None:
            headers["range"] = range_header
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        names = sorted(headers)
        signed = ";".join(names)
        lines = [method, path, query, *[f"{n}:{headers[n]}" for n in names], "", signed]
        canonical = "\n".join(lines) + "\n" + EMPTY_SHA256
        scope = f"{day}/{region}/s3/aws4_request"
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        to_sign = f"{_ALGORITHM}\n{stamp}\n{scope}\n{digest}"
        key = self._signing_key(credentials.secret_key, day, region)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"{_ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        return headers

    def _signing_key(self, secret: str, day: str, region: str) -> bytes:
        cached = self._key_cache
        if cached is not None and cached[:3] == (secret, day, region):
            return cached[3]
        key = ("AWS4" + secret).encode()
        for part in (day, region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._key_cache = (secret, day, region, key)
        return key


def parse_listing(body: bytes) -> Listing:
    """A ListObjectsV2 answer (``encoding-type=url``): keys decoded, sizes, the next token."""
    root = ElementTree.fromstring(body)
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    key_tag, size_tag = f"{ns}Key", f"{ns}Size"
    objects = [
        ObjectInfo(unquote_plus(item.findtext(key_tag) or ""), int(item.findtext(size_tag) or 0))
        for item in root.iter(f"{ns}Contents")
    ]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken") if truncated else None
    return Listing(objects, token or None)


def _parse_error(status: int, body: bytes) -> dict[str, Any]:
    """botocore's shape of an S3 error answer. HEAD answers have no body: the status is the
    code, as botocore makes it."""
    code, message = str(status), ""
    if body:
        try:
            root = ElementTree.fromstring(body)
        except ElementTree.ParseError:
            pass
        else:
            code = root.findtext("Code") or code
            message = root.findtext("Message") or ""
    return {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }


def _transport_error(error: BaseException, url: str) -> Exception:
    """botocore's exception for a request that got no complete answer."""
    translated: Exception
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        translated = ConnectTimeoutError(endpoint_url=url)
    elif isinstance(error, aiohttp.ClientConnectorError):
        translated = EndpointConnectionError(endpoint_url=url, error=error)
    elif isinstance(error, asyncio.TimeoutError):  # aiohttp's read timeouts are TimeoutErrors
        translated = ReadTimeoutError(endpoint_url=url, error=error)
    else:
        translated = ConnectionClosedError(endpoint_url=url)
    return translated


def _env_proxy(endpoint: str) -> tuple[URL, aiohttp.BasicAuth | None] | None:
    """The proxy that ``HTTP(S)_PROXY`` and ``NO_PROXY`` choose for the endpoint, as botocore
    honours them: looked up once per endpoint (aiohttp's ``trust_env`` would look it up, and
    read ``~/.netrc`` in a thread, on every request)."""
    try:
        return aiohttp.helpers.get_env_proxy_for_url(URL(endpoint))
    except LookupError:
        return None


def _quote_key(key: str) -> str:
    return quote(key, safe="/~")


def _canonical_query(params: Mapping[str, str]) -> str:
    return "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items())
    )


@functools.cache
def _shared_loader() -> Loader:
    # The parsed service models are the slow part of creating a client (about 0.25 s).
    return create_loader()


def _resolve(bucket: str, endpoint_url: str | None, region: str | None) -> _Target:
    """Ask botocore where this bucket's requests go: its endpoint rules, the environment's and
    the profile's settings, all applied as for any botocore client. Nothing is sent: the
    requests are answered inside the process before they would leave it."""
    session = botocore.session.Session()
    session.register_component("data_loader", _shared_loader())
    client = session.create_client(
        "s3",
        region_name=region,
        endpoint_url=endpoint_url,
        config=Config(signature_version=botocore.UNSIGNED, retries={"total_max_attempts": 1}),
    )
    urls: list[str] = []
    regions: list[str] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        urls.append(request.url)
        return AWSResponse(request.url, 200, {}, _EmptyRaw())

    def signing_region(region_name: str, **_: Any) -> None:
        regions.append(region_name)

    client.meta.events.register("before-sign.s3", signing_region)
    client.meta.events.register("before-send.s3", capture)
    try:
        client.head_object(Bucket=bucket, Key="k")
        client.list_objects_v2(Bucket=bucket)
    finally:
        client.close()
    object_url, list_url = urls[0], urls[1].partition("?")[0]
    object_base = object_url[: -len("k")]
    parts = urlsplit(object_url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    if parts.port is not None and parts.port != default_port:
        host = f"{host}:{parts.port}"
    return _Target(
        object_base=object_base,
        list_url=list_url,
        host=host,
        path_prefix=urlsplit(object_base).path,
        list_path=urlsplit(list_url).path or "/",
        region=(regions[0] if regions else None) or client.meta.region_name or "us-east-1",
    )


class _EmptyRaw:
    """The raw body of a response that never came: empty."""

    def stream(self, **_: Any) -> Any:
        return iter([b""])
