"""A TCP server on 127.0.0.1 in an event loop of its own thread, for endpoints the tests play
(the S3 deadline tests' outages, the S3 client tests' TLS forwarder).

``LoopServer`` is a context manager: entering starts the loop and the server and sets
``endpoint`` (``http://127.0.0.1:PORT``, ``https://`` with a TLS context); leaving closes the
server, cancels every task it runs and stops the loop. A subclass writes ``_serve``, one
connection, and ``_close`` for what it holds besides its tasks.
"""

from __future__ import annotations

import abc
import asyncio
import ssl
import threading
from typing import Self

__all__ = ["LoopServer", "pump", "upstream_address"]


class LoopServer(abc.ABC):
    """A server on 127.0.0.1 whose connections ``_serve`` answers, in its own loop's thread."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.endpoint = ""

    def __enter__(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context), self._loop
        ).result(timeout=10)
        scheme = "http" if self._context is None else "https"
        self.endpoint = f"{scheme}://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *_: object) -> None:
        async def shutdown() -> None:
            self._server.close()
            self._close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _close(self) -> None:
        """Close what the server holds besides its tasks (in its loop, as it shuts down):
        nothing, unless a subclass holds more."""
        return None

    @abc.abstractmethod
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection."""


def upstream_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``http://host:port`` URL (the moto server's)."""
    host, _, port = url.removeprefix("http://").partition(":")
    return host, int(port)


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until the reader ends; then close the writer."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
