"""Endpoints that fail as S3 does in an outage, on real sockets on 127.0.0.1 (for the S3
deadline tests, tests/integration/test_s3_deadlines.py):

* ``BlackHole`` accepts connections and never answers them;
* ``Switch`` forwards to a real endpoint (the moto server) and can go silent (``down``),
  come back (``up``) or answer every request with S3's 503 SlowDown (``throttle``);
* ``Trickle`` answers 200 with a body of one byte every ``pause`` seconds, never ending.

Each is a context manager; ``endpoint`` is its ``http://127.0.0.1:PORT`` URL.
"""

from __future__ import annotations

import asyncio
import socket
import threading

from tests.support.loop_server import LoopServer, pump, upstream_address

__all__ = ["SLOW_DOWN", "BlackHole", "Switch", "Trickle"]

_SLOW_DOWN_XML = (
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)
SLOW_DOWN = (
    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_SLOW_DOWN_XML), _SLOW_DOWN_XML)
)


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never answers (nor closes) them."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._held.append(connection)

    def __enter__(self) -> BlackHole:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for connection in [self._listener, *self._held]:
            connection.close()


class Switch(LoopServer):
    """A TCP forwarder to ``upstream`` that can go silent: while down it drops the connections it
    carried and holds new ones without a byte (a black hole), as an outage of S3 looks."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self._upstream = upstream_address(upstream)
        self._up: bool | str = True
        self._writers: set[asyncio.StreamWriter] = set()

    def _close(self) -> None:
        for writer in list(self._writers):
            writer.close()

    def down(self) -> None:
        def cut() -> None:
            self._up = False
            for writer in list(self._writers):
                writer.transport.abort()

        self._loop.call_soon_threadsafe(cut)

    def up(self) -> None:
        self._loop.call_soon_threadsafe(setattr, self, "_up", True)

    def throttle(self) -> None:
        """Answer every request with S3's 503 SlowDown instead of forwarding it (connections
        carried so far are dropped, as in ``down``)."""

        def cut() -> None:
            self._up = "throttle"
            for writer in list(self._writers):
                writer.transport.abort()

        self._loop.call_soon_threadsafe(cut)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if not self._up:
                await asyncio.sleep(3600)  # held silently until the test ends
            while self._up == "throttle":
                await reader.readuntil(b"\r\n\r\n")
                writer.write(SLOW_DOWN)
                await writer.drain()
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            self._writers.add(up_writer)
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except (OSError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await pump(reader, writer)
        finally:
            self._writers.discard(writer)


class Trickle(LoopServer):
    """Answers every HTTP request with 200 and a body it sends one byte every ``pause``
    seconds: each wait for bytes is short, the whole answer is endless."""

    def __init__(self, pause: float = 0.1) -> None:
        super().__init__()
        self.pause = pause

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
                b"Content-Length: 100000\r\n\r\n"
            )
            while True:
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(self.pause)
        except (OSError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
