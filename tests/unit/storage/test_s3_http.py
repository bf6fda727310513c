"""``s3_http``, the small HTTP/1.1 client, against scripted servers on 127.0.0.1: framing,
keep-alive reuse, a stale connection, and timeouts that end a request instead of hanging it."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from evaluator.storage.s3_http import (
    ConnectFailed,
    Disconnected,
    HttpClient,
    ReadTimedOut,
    Response,
)
from tests.support import run

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _with_server(
    handler: Handler, body: Callable[[HttpClient, int], Awaitable[object]]
) -> object:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HttpClient(max_connections=4, ssl_context=None)
    try:
        return await body(client, port)
    finally:
        await client.aclose()
        server.close()


async def _get(client: HttpClient, port: int, method: str = "GET", read: float = 5.0) -> Response:
    return await client.request(
        method,
        "http",
        "127.0.0.1",
        port,
        "/b/k",
        {"host": f"127.0.0.1:{port}"},
        connect_timeout=5.0,
        read_timeout=read,
    )


def _answering(*answers: bytes, close: bool = False) -> tuple[Handler, list[str]]:
    """A server answering each request line with the next answer; records the request lines."""
    seen: list[str] = []
    queue = list(answers)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while queue:
                head = await reader.readuntil(b"\r\n\r\n")
                seen.append(head.split(b"\r\n", 1)[0].decode())
                writer.write(queue.pop(0))
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return handler, seen


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n",
            b"hello",
        ),
        (b"HTTP/1.1 206 Partial\r\nContent-Length: 0\r\n\r\n", b""),
    ],
    ids=["content-length", "chunked", "empty"],
)
def test_bodies_are_framed_by_length_or_chunks(answer: bytes, body: bytes) -> None:
    """A body framed by Content-Length or by chunks (extensions and trailers included) arrives
    whole, and the connection is reused for the next request."""
    handler, seen = _answering(answer, answer)

    async def body_of(client: HttpClient, port: int) -> list[bytes]:
        return [(await _get(client, port)).body for _ in range(2)]

    assert run(_with_server(handler, body_of)) == [body, body]
    assert len(seen) == 2


def test_a_body_ended_by_closing_the_connection_is_complete() -> None:
    """Without Content-Length or chunks, the end of the connection ends the body."""
    handler, _ = _answering(b"HTTP/1.1 200 OK\r\nX: y\r\n\r\nuntil the end", close=True)
    response = run(_with_server(handler, _get))
    assert isinstance(response, Response)
    assert response.body == b"until the end" and response.headers["x"] == "y"


def test_head_answers_have_no_body_even_with_a_length() -> None:
    """A HEAD answer announces the object's length but carries no body."""
    handler, _ = _answering(b"HTTP/1.1 200 OK\r\nContent-Length: 123\r\n\r\n")
    response = run(_with_server(handler, lambda c, p: _get(c, p, "HEAD")))
    assert isinstance(response, Response) and response.status == 200 and response.body == b""


def test_a_stale_kept_alive_connection_is_replaced_once() -> None:
    """When the server drops the kept-alive connection as we reuse it (the request read, no
    answer), the request goes out again on a new connection instead of failing."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    connections = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if len(connections) == 1:
                await reader.readuntil(b"\r\n\r\n")  # the reuse: dropped without an answer
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def twice(client: HttpClient, port: int) -> list[bytes]:
        return [(await _get(client, port)).body for _ in range(2)]

    assert run(_with_server(handler, twice)) == [b"ok", b"ok"]
    assert len(connections) == 2


def test_a_truncated_body_is_a_disconnect_after_the_head() -> None:
    """A body cut short by the server is ``Disconnected`` with the head (and status) received."""
    handler, _ = _answering(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close=True)
    with pytest.raises(Disconnected) as error:
        run(_with_server(handler, _get))
    assert error.value.head_received and error.value.status == 200


def test_a_silent_server_is_a_read_timeout_not_a_hang() -> None:
    """A server that accepts and never answers ends the request after the read timeout."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    with pytest.raises(ReadTimedOut) as error:
        run(_with_server(silent, lambda c, p: _get(c, p, read=0.2)), timeout=20)
    assert not error.value.head_received


def test_a_refused_connection_is_connect_failed() -> None:
    """Nothing listening on the port: ``ConnectFailed``."""

    async def body() -> object:
        client = HttpClient(max_connections=1, ssl_context=None)
        try:
            return await _get(client, 9)
        finally:
            await client.aclose()

    with pytest.raises(ConnectFailed):
        run(body())


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_answers_arriving_in_small_pieces_are_reassembled(framing: str) -> None:
    """An answer split into many small writes (chunk boundaries and CRLFs cut in half) gives
    the same body as one write."""
    payload = bytes(range(256)) * 40
    if framing == "chunked":
        chunks = [payload[i : i + 1000] for i in range(0, len(payload), 1000)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    else:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for i in range(0, len(answer), 7):
            writer.write(answer[i : i + 7])
            await writer.drain()
            if i % 700 == 0:
                await asyncio.sleep(0)
        await reader.read()  # until the client closes
        writer.close()

    response = run(_with_server(trickle, _get))
    assert isinstance(response, Response) and response.body == payload


def test_a_body_framed_by_the_end_is_not_complete_when_the_end_is_a_reset() -> None:
    """Without Content-Length or chunks, a reset (not a clean close) leaves the body unfinished:
    ``Disconnected`` after the head, never a short body taken as whole."""

    async def reset_midway(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart of it")
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    with pytest.raises(Disconnected) as error:
        run(_with_server(reset_midway, _get))
    assert error.value.head_received and error.value.status == 200
