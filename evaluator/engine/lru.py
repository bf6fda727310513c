"""Byte-bounded LRU maps for decoded tensor values and raw event-file bytes.

Both are LRU by bytes. Decoded values are handed out as copies, so a rule that changes an
array in place cannot change what the next reader sees (smdebug decodes afresh on every call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

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


_SPAN_OVERHEAD = 56 + 64 + 33  # an (offset, bytes) pair: tuple, int, bytes header


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

    def put(self, key: Hashable, value: V, size: int | None = None) -> None:
        """Keep ``value`` (``size`` bytes, by default estimated from the value)."""
        if size is None:
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

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.current_bytes = 0

    def __len__(self) -> int:
        return len(self._items)


class ValueCache(ByteBoundedLRU[np.ndarray]):
    """Decoded arrays keyed by their record location (the reader hands out private copies).

    An array is admitted on its *second recent* read only: a rule that reads the same values again
    (several steps back, several reductions) finds them, while a single pass over a large trial
    never churns the cache with values nobody reads twice.
    """

    _SEEN_LIMIT = 8192  # "recently": within the last few thousand distinct reads

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._seen: set[Hashable] = set()

    def admit(self, key: Hashable) -> bool:
        """Whether ``key`` was asked for before (and so is worth keeping)."""
        if key in self._seen:
            return True
        if len(self._seen) >= self._SEEN_LIMIT:
            self._seen.clear()
        self._seen.add(key)
        return False


class SharedBytes:
    """One trial's view of a process-wide byte budget: keys are prefixed with the trial, so
    however many trials a process opens (a rule comparing runs opens two), their cached
    event-file bytes together stay within one bound."""

    def __init__(self, shared: ByteBoundedLRU[Any], prefix: str) -> None:
        self._shared = shared
        self._prefix = prefix
        self.max_bytes = shared.max_bytes

    def get(self, key: str) -> Any:
        return self._shared.get((self._prefix, key))

    def put(self, key: str, value: Any) -> None:
        """Keep ``value``: an event file's ``(offset, bytes)``, whose size is counted here
        (as ``_nbytes`` counts it, without its walk), or anything ``_nbytes`` can size."""
        size = _SPAN_OVERHEAD + len(value[1]) if type(value) is tuple else None
        self._shared.put((self._prefix, key), value, size)

    def clear(self) -> None:
        """Nothing: other trials share the budget; entries of a closed trial age out."""

    @property
    def hits(self) -> int:
        return self._shared.hits


_shared_lock = threading.Lock()
_shared_bytes: dict[int, ByteBoundedLRU[Any]] = {}


def shared_bytes(max_bytes: int) -> ByteBoundedLRU[Any]:
    """The process-wide byte cache of that size (one per distinct size asked for)."""
    with _shared_lock:
        found = _shared_bytes.get(max_bytes)
        if found is None:
            found = _shared_bytes[max_bytes] = ByteBoundedLRU(max_bytes)
        return found
