"""In-memory storage for tests: a dict of objects that may grow while readers run.

``put`` and ``delete`` are thread-safe, so a test can write a "growing trial" from another thread
while the evaluator's event loop lists and reads. ``calls`` counts operations the way S3 bills
requests (one ``"list"`` per page), so request-count tests can run without a server.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections import Counter
from collections.abc import AsyncIterator, Mapping

from evaluator.errors import ObjectNotFound
from evaluator.storage.base import ObjectInfo

__all__ = ["MemoryStorage"]


class MemoryStorage:
    """A ``Storage`` over a dict of ``key -> bytes``.

    ``calls`` counts ``"list"`` (per page), ``"read"``, ``"read_range"`` and ``"exists"``;
    ``calls.clear()`` resets it.
    """

    def __init__(
        self,
        objects: Mapping[str, bytes] | None = None,
        *,
        uri: str = "memory://trial",
        page_size: int = 1000,
    ) -> None:
        self._uri = uri
        self._page_size = page_size
        self._lock = threading.Lock()
        self._objects: dict[str, bytes] = {}
        self._keys: list[str] = []  # sorted, so a listing is a bisect plus a slice
        self.calls: Counter[str] = Counter()
        for key, data in (objects or {}).items():
            self.put(key, data)

    @property
    def uri(self) -> str:
        return self._uri

    def put(self, key: str, data: bytes) -> None:
        """Add or replace an object (safe from any thread)."""
        with self._lock:
            if key not in self._objects:
                bisect.insort(self._keys, key)
            self._objects[key] = bytes(data)

    def delete(self, key: str) -> None:
        """Remove an object if present (safe from any thread)."""
        with self._lock:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        cursor = start_after or ""
        while True:
            page, truncated = await self._page(prefix, cursor)
            for info in page:
                yield info
            if not truncated:
                return
            # Like S3's continuation: the next page starts after the last key seen, so objects
            # added meanwhile show up if they sort later.
            cursor = page[-1].key

    async def _page(self, prefix: str, cursor: str) -> tuple[list[ObjectInfo], bool]:
        await self._request("list")
        with self._lock:
            first = max(
                bisect.bisect_right(self._keys, cursor), bisect.bisect_left(self._keys, prefix)
            )
            keys = self._keys[first : first + self._page_size + 1]
            page = [ObjectInfo(k, len(self._objects[k])) for k in keys if k.startswith(prefix)]
        truncated = len(page) > self._page_size
        return page[: self._page_size], truncated

    async def read(self, key: str) -> bytes:
        await self._request("read")
        return self._get(key)

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0:
            raise ValueError(f"negative start {start} reading {key!r}")
        if start >= end:
            return b""
        await self._request("read_range")
        return self._get(key)[start:end]

    async def exists(self, key: str) -> bool:
        await self._request("exists")
        with self._lock:
            return key in self._objects

    async def aclose(self) -> None:
        return None

    async def _request(self, operation: str) -> None:
        with self._lock:
            self.calls[operation] += 1
        # Yield to the loop as real I/O would, so concurrent readers interleave in tests.
        await asyncio.sleep(0)

    def _get(self, key: str) -> bytes:
        with self._lock:
            data = self._objects.get(key)
        if data is None:
            uri = f"{self._uri.rstrip('/')}/{key}"
            raise ObjectNotFound(f"{uri} does not exist", uri=uri)
        return data
