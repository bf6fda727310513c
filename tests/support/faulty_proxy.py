"""A fault-injecting HTTP proxy on 127.0.0.1, to put in front of the moto server.

Point ``AWS_ENDPOINT_URL`` at ``proxy.endpoint``. On a seeded share of requests (at most
``max_faults`` in all, and at most ``max_in_a_row`` times running for the same request, so that
bounded retries always get through) the proxy answers one of:

* ``"slowdown"``: 503 with S3's ``SlowDown`` XML error;
* ``"internal"``: 500 with S3's ``InternalError`` XML error;
* ``"reset"``: a TCP reset instead of any answer;
* ``"truncate"``: the real answer's headers and half of its body, then a reset.

``deny=True`` answers every request with S3's 403 ``AccessDenied`` instead.
``loop_listings=True`` makes every ListObjectsV2 answer truncated with the continuation token
``loop``, and answers a request carrying a token with the first page again: a listing that
would never end (``listings`` counts them). Every read has a
timeout and every connection ends on EOF, an error or ``IDLE_TIMEOUT``, so nothing here can hang
a test for long.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["FAULT_KINDS", "FaultyProxy"]

FAULT_KINDS = ("slowdown", "internal", "reset", "truncate")
IDLE_TIMEOUT = 10.0
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}
_ERRORS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error.",
    ),
    "deny": (403, "Forbidden", "AccessDenied", "Access Denied"),
}


@dataclass
class _Message:
    head: str  # request or status line
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


class FaultyProxy:
    """Forwards HTTP/1.1 requests to ``upstream``, breaking some of them on purpose."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.2,
        kinds: Sequence[str] = FAULT_KINDS,
        seed: int = 0,
        max_faults: int = 1000,
        max_in_a_row: int | None = 2,
        deny: bool = False,
        loop_listings: bool = False,
    ) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._rate, self._kinds, self._deny = rate, tuple(kinds), deny
        self._random = random.Random(seed)
        self._faults_left = max_faults
        self._max_in_a_row = max_in_a_row
        self._in_a_row: Counter[str] = Counter()  # faults running per request (line + Range)
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self.ranges: list[str] = []  # every Range header received, in arrival order
        self._loop_listings = loop_listings
        self._first_page: _Message | None = None
        self.listings = 0  # list requests answered (loop_listings)
        self.endpoint = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> FaultyProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve_connection, "127.0.0.1", 0), self._loop
        ).result(timeout=10)
        port = self._server.sockets[0].getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> FaultyProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _draw(self, request: _Message) -> str | None:
        """The fault for the next request, or None to forward it untouched."""
        self.requests += 1
        if self._deny:
            return "deny"
        identity = f"{request.head} {request.header('range')}"
        exhausted = (
            self._max_in_a_row is not None and self._in_a_row[identity] >= self._max_in_a_row
        )
        if exhausted or self._faults_left <= 0 or self._random.random() >= self._rate:
            self._in_a_row.pop(identity, None)
            return None
        self._faults_left -= 1
        self._in_a_row[identity] += 1
        kind = self._random.choice(self._kinds)
        self.injected[kind] += 1
        return kind

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                request = await asyncio.wait_for(_read_request(reader), IDLE_TIMEOUT)
                if request is None or not await self._answer(request, writer):
                    break
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _answer(self, request: _Message, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must end."""
        if (requested_range := request.header("range")) is not None:
            self.ranges.append(requested_range)
        fault = self._draw(request)
        if fault in _ERRORS:
            writer.write(_error_response(*_ERRORS[fault]))
            await writer.drain()
            return True
        if fault == "reset":
            _reset(writer)
            return False
        if self._loop_listings and "list-type=2" in request.head:
            response = await self._looping_listing(request)
        else:
            response = await asyncio.wait_for(self._forward(request), IDLE_TIMEOUT)
        headers = [(k, v) for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
        if not request.head.startswith("HEAD "):  # HEAD keeps the size of the body it omits
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(response.body))))
        data = _encode(_Message(response.head, headers, response.body))
        if fault == "truncate" and len(response.body) > 1:
            writer.write(data[: -(len(response.body) // 2)])
            await writer.drain()
            _reset(writer)
            return False
        writer.write(data)
        await writer.drain()
        return True

    async def _looping_listing(self, request: _Message) -> _Message:
        """The first page of the listing, truncated, with the token ``loop``, whatever token
        the request carries."""
        self.listings += 1
        if "continuation-token=" in request.head and self._first_page is not None:
            return self._first_page
        response = await asyncio.wait_for(self._forward(request), IDLE_TIMEOUT)
        body = response.body.replace(
            b"<IsTruncated>false</IsTruncated>",
            b"<IsTruncated>true</IsTruncated><NextContinuationToken>loop</NextContinuationToken>",
        )
        self._first_page = _Message(response.head, response.headers, body)
        return self._first_page

    async def _forward(self, request: _Message) -> _Message:
        reader, writer = await asyncio.open_connection(*self._upstream)
        try:
            headers = [(k, v) for k, v in request.headers if k.lower() not in _HOP_BY_HOP]
            headers.append(("Connection", "close"))  # one request per upstream connection
            writer.write(_encode(_Message(request.head, headers, request.body)))
            await writer.drain()
            return await _read_response(reader, request.head.startswith("HEAD "))
        finally:
            writer.close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]]] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the peer closed between messages
    first, *lines = raw.decode("latin-1").split("\r\n")[:-2]
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines)]
    return first, headers


async def _read_request(reader: asyncio.StreamReader) -> _Message | None:
    parsed = await _read_head(reader)
    if parsed is None:
        return None
    message = _Message(parsed[0], parsed[1], b"")
    if (message.header("transfer-encoding") or "").lower() == "chunked":
        raise ValueError("chunked uploads are not supported by this test proxy")
    message.body = await reader.readexactly(int(message.header("content-length") or 0))
    return message


async def _read_response(reader: asyncio.StreamReader, is_head: bool) -> _Message:
    parsed = await _read_head(reader)
    if parsed is None:
        raise ValueError("upstream closed without answering")
    message = _Message(parsed[0], parsed[1], b"")
    status = int(message.head.split()[1])
    if is_head or status in (204, 304) or status < 200:
        return message
    length = message.header("content-length")
    if length is not None:
        message.body = await reader.readexactly(int(length))
    elif (message.header("transfer-encoding") or "").lower() == "chunked":
        message.body = await _read_chunked(reader)
    else:
        message.body = await reader.read()  # we asked for Connection: close, so EOF ends it
    return message


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readline()
    while (await reader.readline()) not in (b"\r\n", b""):  # trailers
        pass
    return b"".join(parts)


def _encode(message: _Message) -> bytes:
    lines = [message.head, *(f"{k}: {v}" for k, v in message.headers), "", ""]
    return "\r\n".join(lines).encode("latin-1") + message.body


def _error_response(status: int, reason: str, code: str, text: str) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{text}</Message>"
        "<RequestId>FAULTYPROXY</RequestId></Error>"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (linger 0) rather than a polite FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
