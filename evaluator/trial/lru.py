"""Byte-bounded LRU maps for decoded tensor values and raw event-file bytes.

Both are LRU by bytes. Decoded values are handed out as copies, so a rule that changes an
array in place cannot change what the next reader sees (smdebug decodes afresh on every call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np

__all__ = ["ByteBoundedLRU", "ValueCache"]

V = TypeVar("V")


def _nbytes(value: object) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 112  # array header
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) + 33
    if isinstance(value, tuple):
        return 56 + sum(_nbytes(v) for v in value)
    return 64


class ByteBoundedLRU(Generic[V]):
    """A thread-safe LRU mapping whose entries' sizes add up to at most ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self.current_bytes = 0
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, value: V) -> None:
        size = _nbytes(value)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.current_bytes -= old[1]
            self._items[key] = (value, size)
            self.current_bytes += size
            while self.current_bytes > self.max_bytes:
                _, (_, evicted) = self._items.popitem(last=False)
                self.current_bytes -= evicted

    def pop(self, key: Hashable) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.current_bytes -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.current_bytes = 0

    def __len__(self) -> int:
        return len(self._items)


class ValueCache(ByteBoundedLRU[np.ndarray]):
    """Decoded arrays keyed by their record location; ``get_copy`` hands out private copies."""

    def get_copy(self, key: Hashable) -> np.ndarray | None:
        value = self.get(key)
        return None if value is None else value.copy()
