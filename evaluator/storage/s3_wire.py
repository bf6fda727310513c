"""One S3 request on the wire: signed with SigV4, sent with ``s3_http``, answered as a ``Reply``.

This is the lean half of the S3 backend (``s3.py`` holds the other: retries, deadlines,
translation). botocore stays for what it does well and does once per client: resolving
credentials (``aiobotocore``'s async chain: environment, profiles, container and instance
roles, web identity) and resolving where a bucket lives (its endpoint rules, with
``AWS_ENDPOINT_URL[_S3]``, the region and the profile's S3 settings). For that second part we
ask a botocore client, once, to build a request that never leaves the process, and keep its
URL as the template every later request reuses. Per request we then pay for one SigV4
signature (the signing key is derived once a day), one HTTP exchange on a kept-alive connection
(``s3_http``; aiohttp when a proxy is configured) and, for listings, one
XML parse: about a tenth of botocore's request building, hooks, signing and parsing.

Transport failures are raised as botocore's own exceptions (``EndpointConnectionError``,
``ConnectTimeoutError``, ``ReadTimeoutError``, ``ConnectionClosedError``) so that botocore's
retry conditions and our translation treat them as before. A body that breaks after a
successful head is ``BodyBroken``: botocore never saw those, and ``s3.py`` retries them itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import ssl
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, unquote_plus, urlsplit

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
from botocore.httpsession import get_cert_path

from evaluator.storage import s3_http
from evaluator.storage.base import ObjectInfo

__all__ = ["BodyBroken", "Listing", "Reply", "S3Wire", "Timeouts"]

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ALGORITHM = "AWS4-HMAC-SHA256"
_USER_AGENT = "debugger-rule-evaluator"
_PLAIN_QUERY = re.compile(r"[A-Za-z0-9_.~/-]*")
_STAMP: list[object] = [None, ""]  # [epoch second, its x-amz-date]


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
    scheme: str
    connect_host: str  # where to connect: the URL's host (brackets kept for IPv6)
    port: int
    verify: bool | str  # botocore's verify: True, False, or a CA bundle (AWS_CA_BUNDLE)

    @property
    def origin(self) -> str:
        """``scheme://host[:port]``, as the URLs botocore built name it."""
        parts = urlsplit(self.list_url)
        return f"{parts.scheme}://{parts.netloc}"

    endpoint = origin


class S3Wire:
    """Signed GET, HEAD and ListObjectsV2 requests for one bucket, over kept-alive connections.

    Create it inside the event loop that will use it (``await S3Wire.open(...)``); ``aclose``
    there. Never raises botocore's ``ClientError``: an error answer is a ``Reply`` too.
    """

    def __init__(
        self,
        bucket: str,
        target: _Target,
        credentials: Any,
        *,
        endpoint_url: str | None,
        max_connections: int,
    ) -> None:
        self._bucket = bucket
        self._target = target
        self._credentials = credentials
        self._endpoint_url = endpoint_url
        self._max_connections = max_connections
        self._key_cache: tuple[str, str, str, bytes] | None = None
        self._transport = _transport_for(target, max_connections)

    @classmethod
    async def open(cls, bucket: str, *, endpoint_url: str | None, max_connections: int) -> S3Wire:
        """Resolve credentials and the bucket's endpoint; connections open on first use."""
        credentials = await get_session().get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        target = _resolve(bucket, endpoint_url, None)
        return cls(
            bucket, target, credentials, endpoint_url=endpoint_url, max_connections=max_connections
        )

    @property
    def endpoint(self) -> str:
        """``scheme://host[:port]`` of the bucket's endpoint, for messages."""
        return self._target.endpoint

    @property
    def region(self) -> str:
        return self._target.region

    async def retarget(self, region: str) -> None:
        """Send later requests to the bucket's own region (S3 said where it is)."""
        old = self._transport
        self._target = _resolve(self._bucket, self._endpoint_url, region)
        self._transport = _transport_for(self._target, self._max_connections)
        await old.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def get(self, key: str, range_header: str | None, timeouts: Timeouts) -> Reply:
        path = self._target.path_prefix + _quote_key(key)
        return await self._send("GET", path, "", range_header, timeouts)

    async def head(self, key: str, timeouts: Timeouts) -> Reply:
        path = self._target.path_prefix + _quote_key(key)
        return await self._send("HEAD", path, "", None, timeouts)

    async def list(self, params: Mapping[str, str], timeouts: Timeouts) -> Reply:
        """ListObjectsV2 with ``params`` (``prefix``, ``start-after``, ``continuation-token``,
        ``max-keys``); keys come URL-encoded and ``parse_listing`` decodes them."""
        query = _canonical_query({"list-type": "2", "encoding-type": "url", **params})
        return await self._send("GET", self._target.list_path, query, None, timeouts)

    async def _send(
        self, method: str, path: str, query: str, range_header: str | None, timeouts: Timeouts
    ) -> Reply:
        credentials = await self._credentials.get_frozen_credentials()
        headers = self._sign(credentials, method, path, query, range_header)
        headers["user-agent"] = _USER_AGENT
        target = f"{path}?{query}" if query else path
        try:
            response = await self._transport.send(method, target, headers, timeouts)
        except s3_http.HttpError as error:
            if error.head_received and error.status < 300:
                raise BodyBroken(f"{type(error).__name__}: {error}") from error
            raise _transport_error(error, self._target.origin + target) from error
        status = response.status
        parsed = None if status < 300 else _parse_error(status, response.body)
        return Reply(status, response.headers, response.body, parsed)

    def _sign(
        self, credentials: Any, method: str, path: str, query: str, range_header: str | None
    ) -> dict[str, str]:
        """SigV4 headers for a request without a body (S3's header-based authentication)."""
        stamp = _timestamp()
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
        signature = hmac.digest(key, to_sign.encode(), "sha256").hex()
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


def parse_listing(body: bytes, *, strip: int = 0) -> Listing:
    """A ListObjectsV2 answer (``encoding-type=url``): keys decoded (less their first ``strip``
    characters: the trial's root), sizes, the next token."""
    if b"Contents>" not in body and b"IsTruncated>true<" not in body:
        return Listing([], None)  # an idle poll's answer: no XML tree needed
    root = ElementTree.fromstring(body)
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    key_tag, size_tag = f"{ns}Key", f"{ns}Size"
    # Keys come URL-encoded when the answer says so (botocore decodes them on the same sign);
    # a server that ignored encoding-type sent them as XML text, already decoded by the parser.
    decode = unquote_plus if root.findtext(f"{ns}EncodingType") == "url" else str
    objects = [
        ObjectInfo(decode(item.findtext(key_tag) or "")[strip:], int(item.findtext(size_tag) or 0))
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


def _transport_error(error: s3_http.HttpError, url: str) -> Exception:
    """botocore's exception for a request that got no complete answer."""
    translated: Exception
    if isinstance(error, s3_http.ConnectTimedOut):
        translated = ConnectTimeoutError(endpoint_url=url)
    elif isinstance(error, s3_http.ConnectFailed):
        translated = EndpointConnectionError(endpoint_url=url, error=error)
    elif isinstance(error, s3_http.ReadTimedOut):
        translated = ReadTimeoutError(endpoint_url=url, error=error)
    else:
        translated = ConnectionClosedError(endpoint_url=url)
    return translated


class _Transport(Protocol):
    async def send(
        self, method: str, target: str, headers: dict[str, str], timeouts: Timeouts
    ) -> s3_http.Response: ...

    async def aclose(self) -> None: ...


class _Direct:
    """Straight to the endpoint, on ``s3_http``'s kept-alive connections."""

    def __init__(self, target: _Target, max_connections: int) -> None:
        self._client = s3_http.HttpClient(
            max_connections=max_connections,
            ssl_context=_ssl_context(target.verify) if target.scheme == "https" else None,
        )
        self._origin = (target.scheme, target.connect_host, target.port)

    async def send(
        self, method: str, target: str, headers: dict[str, str], timeouts: Timeouts
    ) -> s3_http.Response:
        scheme, host, port = self._origin
        return await self._client.request(
            method,
            scheme,
            host,
            port,
            target,
            headers,
            connect_timeout=timeouts.connect,
            read_timeout=timeouts.read,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


class _Proxied:
    """Through the proxy that ``HTTP(S)_PROXY`` names (``NO_PROXY`` honoured, as botocore does),
    on aiohttp, which speaks to proxies (CONNECT tunnels included)."""

    def __init__(self, target: _Target, proxy: str, max_connections: int) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._origin = target.origin
        self._proxy = proxy
        self._ssl = _ssl_context(target.verify) if target.scheme == "https" else None
        self._max_connections = max_connections
        self._session: Any = None

    async def send(
        self, method: str, target: str, headers: dict[str, str], timeouts: Timeouts
    ) -> s3_http.Response:
        aiohttp = self._aiohttp
        from yarl import URL

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections, ssl=self._ssl or True),
                auto_decompress=False,  # S3 sends objects as stored: never transform the bytes
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
            )
        timeout = aiohttp.ClientTimeout(sock_connect=timeouts.connect, sock_read=timeouts.read)
        head_received, status = False, 0
        try:
            async with self._session.request(
                method,
                URL(self._origin + target, encoded=True),  # sent exactly as signed
                headers=headers,
                allow_redirects=False,
                timeout=timeout,
                proxy=self._proxy,
            ) as response:
                head_received, status = True, response.status
                body = await response.read()
                return s3_http.Response(
                    status, {k.lower(): v for k, v in response.headers.items()}, body
                )
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            failure: s3_http.HttpError
            if isinstance(error, aiohttp.ConnectionTimeoutError):
                failure = s3_http.ConnectTimedOut(str(error))
            elif isinstance(error, aiohttp.ClientConnectorError):
                failure = s3_http.ConnectFailed(str(error))
            elif isinstance(error, asyncio.TimeoutError):
                failure = s3_http.ReadTimedOut(str(error))
            else:
                failure = s3_http.Disconnected(f"{type(error).__name__}: {error}")
            failure.head_received, failure.status = head_received, status
            raise failure from error

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _transport_for(target: _Target, max_connections: int) -> _Transport:
    proxy = _env_proxy(target)
    return _Proxied(target, proxy, max_connections) if proxy else _Direct(target, max_connections)


def _env_proxy(target: _Target) -> str | None:
    """The proxy URL for the endpoint from ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY``."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(target.scheme)
    if not proxy or urllib.request.proxy_bypass(target.connect_host.strip("[]")):
        return None
    return proxy


def _ssl_context(verify: bool | str) -> ssl.SSLContext:
    """TLS as botocore would verify it: its CA bundle (certifi, or AWS_CA_BUNDLE), or none."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=get_cert_path(verify))


def _quote_key(key: str) -> str:
    return quote(key, safe="/~")


def _canonical_query(params: Mapping[str, str]) -> str:
    return "&".join(f"{_query_quote(k)}={_query_quote(v)}" for k, v in sorted(params.items()))


def _query_quote(text: str) -> str:
    """SigV4's encoding of a query name or value; keys made of the usual characters take a
    shortcut (``quote`` costs a few microseconds per call)."""
    if _PLAIN_QUERY.fullmatch(text):
        return text.replace("/", "%2F")
    return quote(text, safe="-_.~")


def _timestamp() -> str:
    """SigV4's ``x-amz-date`` for now, formatted once per second."""
    now = int(time.time())
    cached = _STAMP
    if cached[0] != now:
        cached[:] = [now, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))]
    return str(cached[1])


def _resolve(bucket: str, endpoint_url: str | None, region: str | None) -> _Target:
    """Ask botocore where this bucket's requests go: its endpoint rules, the environment's and
    the profile's settings, all applied as for any botocore client. Nothing is sent: the
    requests are answered inside the process before they would leave it."""
    # The parsed service model and endpoint rules (about 30,000 objects) are dropped with the
    # client: kept, every full garbage collection of the process would walk them again.
    session = botocore.session.Session()
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
    connect_host = parts.hostname or ""
    if ":" in connect_host:  # IPv6
        connect_host = f"[{connect_host}]"
    default_port = {"http": 80, "https": 443}.get(parts.scheme, 443)
    port = parts.port or default_port
    host = connect_host if port == default_port else f"{connect_host}:{port}"
    verify = getattr(getattr(client, "_endpoint", None), "http_session", None)
    return _Target(
        object_base=object_base,
        list_url=list_url,
        host=host,
        path_prefix=urlsplit(object_base).path,
        list_path=urlsplit(list_url).path or "/",
        region=(regions[0] if regions else None) or client.meta.region_name or "us-east-1",
        scheme=parts.scheme,
        connect_host=connect_host,
        port=port,
        verify=getattr(verify, "_verify", True),
    )


class _EmptyRaw:
    """The raw body of a response that never came: empty."""

    def stream(self, **_: Any) -> Any:
        return iter([b""])
