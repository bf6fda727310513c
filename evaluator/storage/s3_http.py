"""A small HTTP/1.1 client on asyncio protocols: what S3's GET, HEAD and LIST need, no more.

Why not aiohttp: per request it runs cookie jars, tracing hooks, redirect and auth machinery and
several timers, about 0.3 ms of CPU for a 300-byte object, more than everything else a request
costs here. This client writes the request in one ``write`` and parses the answer in
``data_received``: a head, then a body framed by ``Content-Length``, chunks, or the end of the
connection. Connections are kept alive and reused (at most ``max_connections`` at once).

Failures are this module's own exceptions, with ``head_received`` telling whether the answer's
head had arrived (``s3_wire`` maps them to botocore's exceptions, or to ``BodyBroken``):

* ``ConnectFailed`` / ``ConnectTimedOut``: no connection;
* ``ReadTimedOut``: no byte for ``read_timeout`` seconds while an answer was awaited;
* ``Disconnected``: the connection ended before the answer was complete.

A request on a reused keep-alive connection that ends before any byte of the answer is sent
again once on a new connection: the server closed the idle connection as we reused it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ConnectFailed",
    "ConnectTimedOut",
    "Disconnected",
    "HttpClient",
    "HttpError",
    "ReadTimedOut",
    "Response",
]

_MAX_HEAD = 64 * 1024


class HttpError(Exception):
    """A request without a complete answer; ``status`` is the answer's when its head came."""

    head_received = False
    status = 0


class ConnectFailed(HttpError):
    """The connection could not be opened (refused, unreachable, name not resolved, TLS)."""


class ConnectTimedOut(HttpError):
    """Opening the connection took longer than the connect timeout."""


class ReadTimedOut(HttpError):
    """No byte arrived for the read timeout while an answer was awaited."""


class Disconnected(HttpError):
    """The connection ended (or sent something that is not HTTP) before the answer was whole."""


@dataclass(frozen=True, slots=True)
class Response:
    """One complete answer; header names in lower case."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as bytes arrive."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._is_head = False
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._length: int | None = None  # body bytes expected; None: chunked or until closed
        self._chunked = False
        self._chunks: list[bytes] = []
        self._keep_alive = True
        self._activity = 0.0
        self._read_timeout = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.closed = True  # bytes nobody asked for: this connection is not reusable
            if self.transport is not None:
                self.transport.abort()
            return
        self._activity = self._loop.time()
        self._buffer += data
        try:
            self._parse()
        except (ValueError, IndexError) as error:
            self._fail(Disconnected(f"not an HTTP answer: {error}"))

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if exc is None and self._headers is not None and self._length is None and not self._chunked:
            self._complete(bytes(self._buffer))  # a body framed by a clean end of the connection
            return
        reason = f"{type(exc).__name__}: {exc}" if exc else "closed by the server"
        self._fail(Disconnected(f"connection ended before the answer was complete ({reason})"))

    # -- one exchange

    async def exchange(self, request: bytes, *, is_head: bool, read_timeout: float) -> Response:
        assert self.transport is not None
        self._waiter = self._loop.create_future()
        self._is_head = is_head
        self._status, self._headers, self._length = 0, None, None
        self._chunked, self._chunks = False, []
        self._read_timeout = read_timeout
        self._activity = self._loop.time()
        self._timer = self._loop.call_at(self._activity + read_timeout, self._check_timeout)
        self.transport.write(request)
        try:
            return await self._waiter
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed and not self._buffer

    def _check_timeout(self) -> None:
        if self._waiter is None or self._waiter.done():
            return
        due = self._activity + self._read_timeout
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check_timeout)
            return
        self._fail(ReadTimedOut(f"no data for {self._read_timeout:g} s"))
        self.abort()

    def _fail(self, error: HttpError) -> None:
        error.head_received, error.status = self._headers is not None, self._status
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        if self.transport is not None:
            self.transport.abort()

    def _complete(self, body: bytes) -> None:
        assert self._headers is not None and self._waiter is not None
        self._waiter.set_result(Response(self._status, self._headers, body))

    def _parse(self) -> None:
        buffer = self._buffer
        if self._headers is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise ValueError("head too long")
                return
            self._parse_head(bytes(buffer[:end]))
            del buffer[: end + 4]
        if self._chunked:
            self._parse_chunks()
        elif self._length is not None and len(buffer) >= self._length:
            with memoryview(buffer) as view:
                body = bytes(view[: self._length])  # one copy, even of a 16 MB body
            del buffer[: self._length]
            self._complete(body)

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, status, *_ = lines[0].split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError(f"status line {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._status, self._headers = int(status), headers
        connection = headers.get("connection", "").lower()
        self._keep_alive = connection != "close" and (
            version != "HTTP/1.0" or "keep-alive" in connection
        )
        if self._is_head or self._status in (204, 304) or self._status < 200:
            self._length = 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif "content-length" in headers:
            self._length = int(headers["content-length"])
        else:
            self._keep_alive = False  # the end of the connection ends the body

    def _parse_chunks(self) -> None:
        buffer, position = self._buffer, 0
        try:
            while True:
                end = buffer.find(b"\r\n", position)
                if end < 0:
                    return
                size = int(bytes(buffer[position:end]).split(b";", 1)[0], 16)
                if size == 0:  # the last chunk, then trailers (usually none) and an empty line
                    if buffer[end + 2 : end + 4] == b"\r\n":
                        position = end + 4
                    else:
                        trailers_end = buffer.find(b"\r\n\r\n", end + 2)
                        if trailers_end < 0:
                            return
                        position = trailers_end + 4
                    self._complete(b"".join(self._chunks))
                    return
                data_end = end + 2 + size
                if len(buffer) < data_end + 2:
                    return
                self._chunks.append(bytes(buffer[end + 2 : data_end]))
                position = data_end + 2
        finally:
            del buffer[:position]  # once per arrival, not once per chunk


class HttpClient:
    """Keep-alive HTTP/1.1 connections to any number of origins, ``max_connections`` in use."""

    def __init__(self, *, max_connections: int, ssl_context: ssl.SSLContext | None) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._gate = asyncio.Semaphore(max_connections)
        self._ssl = ssl_context
        self._open: set[_Connection] = set()

    async def request(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int,
        target: str,
        headers: Mapping[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
    ) -> Response:
        """Send one request without a body; the complete answer."""
        lines = [f"{method} {target} HTTP/1.1", *[f"{k}: {v}" for k, v in headers.items()]]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        origin = (scheme, host, port)
        async with self._gate:
            connection = self._take(origin)
            if connection is not None:
                try:
                    return await self._exchange(origin, connection, data, method, read_timeout)
                except Disconnected as error:
                    if error.head_received:
                        raise
                    # the server closed the idle connection as we reused it: send it anew
            connection = await self._connect(scheme, host, port, connect_timeout)
            return await self._exchange(origin, connection, data, method, read_timeout)

    async def aclose(self) -> None:
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()

    def _take(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if (
                connection.reusable
                and connection.transport
                and not connection.transport.is_closing()
            ):
                return connection
            self._open.discard(connection)
        return None

    async def _exchange(
        self,
        origin: tuple[str, str, int],
        connection: _Connection,
        data: bytes,
        method: str,
        read_timeout: float,
    ) -> Response:
        try:
            response = await connection.exchange(
                data, is_head=method == "HEAD", read_timeout=read_timeout
            )
        except BaseException:  # a failure or a cancellation: the connection's state is unknown
            connection.abort()
            self._open.discard(connection)
            raise
        if connection.reusable:
            self._idle.setdefault(origin, []).append(connection)
        else:
            connection.abort()
            self._open.discard(connection)
        return response

    async def _connect(
        self, scheme: str, host: str, port: int, connect_timeout: float
    ) -> _Connection:
        loop = asyncio.get_running_loop()
        secure = scheme == "https"
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(loop),
                    host.strip("[]"),
                    port,
                    ssl=(self._ssl or ssl.create_default_context()) if secure else None,
                    server_hostname=host.strip("[]") if secure else None,
                ),
                connect_timeout,
            )
        except TimeoutError as error:
            raise ConnectTimedOut(f"no connection within {connect_timeout:g} s") from error
        except OSError as error:
            raise ConnectFailed(f"{type(error).__name__}: {error}") from error
        self._open.add(connection)
        return connection
