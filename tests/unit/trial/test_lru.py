"""Byte-bounded LRU maps: the value cache's admission and the process-wide byte budget."""

from __future__ import annotations

import numpy as np

from evaluator.engine.lru import ByteBoundedLRU, SharedBytes, ValueCache, shared_bytes

ITEM = b"x" * 67  # 100 bytes as the LRU counts them (the payload plus 33)


def test_the_least_recently_used_entry_is_evicted_first() -> None:
    """Over budget, the entry used longest ago goes first; a read makes an entry recent."""
    lru: ByteBoundedLRU[bytes] = ByteBoundedLRU(300)
    for key in "abc":
        lru.put(key, ITEM)
    assert lru.get("a") == ITEM
    lru.put("d", ITEM)
    assert [k for k in "abcd" if lru.get(k) is not None] == ["a", "c", "d"]
    assert lru.current_bytes == 300


def test_an_entry_larger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    """A value that could never fit is refused, leaving the cache as it was."""
    lru: ByteBoundedLRU[bytes] = ByteBoundedLRU(300)
    lru.put("a", ITEM)
    lru.put("huge", b"x" * 1000)
    assert lru.get("huge") is None and lru.get("a") == ITEM and lru.current_bytes == 100


def test_replacing_an_entry_counts_its_bytes_once() -> None:
    """Putting a key again replaces its value and its size."""
    lru: ByteBoundedLRU[bytes] = ByteBoundedLRU(300)
    lru.put("a", ITEM)
    lru.put("a", b"y" * 17)
    assert lru.get("a") == b"y" * 17 and lru.current_bytes == 50 and len(lru) == 1


def test_arrays_count_their_data_and_header() -> None:
    """An array's size is its buffer plus a fixed header, so a budget bounds decoded values."""
    lru: ByteBoundedLRU[np.ndarray] = ByteBoundedLRU(10_000)
    lru.put("v", np.zeros(1000, np.float32))
    assert lru.current_bytes == 4000 + 112


def test_the_value_cache_admits_a_value_on_its_second_recent_read() -> None:
    """A single pass never fills the value cache: only a value asked for twice is worth keeping."""
    cache = ValueCache(10_000)
    assert not cache.admit(("e", 0))
    assert cache.admit(("e", 0))
    assert not cache.admit(("e", 8))


def test_the_value_cache_forgets_reads_beyond_its_window() -> None:
    """Reads older than the last few thousand distinct ones no longer count as recent."""
    cache = ValueCache(10_000)
    cache.admit("first")
    for i in range(ValueCache._SEEN_LIMIT):
        cache.admit(i)
    assert not cache.admit("first")


def test_trials_share_one_byte_budget_without_sharing_keys() -> None:
    """Two trials' byte caches fill one process-wide budget; neither sees the other's entries."""
    budget = shared_bytes(250)
    assert shared_bytes(250) is budget
    one, two = SharedBytes(budget, "one"), SharedBytes(budget, "two")
    one.put("events/0", ITEM)
    two.put("events/0", b"z" * 67)
    assert one.get("events/0") == ITEM and two.get("events/0") == b"z" * 67
    two.put("events/1", ITEM)
    assert one.get("events/0") is None  # the oldest entry of the shared budget went first
    assert budget.current_bytes <= 250


def test_event_file_spans_count_the_bytes_the_estimate_counts() -> None:
    """``SharedBytes`` passes the size of an (offset, bytes) pair itself: the same number the
    generic estimate gives, so the bound means what it meant."""
    from evaluator.engine.lru import ByteBoundedLRU, SharedBytes, _nbytes

    shared: ByteBoundedLRU[object] = ByteBoundedLRU(10_000)
    view = SharedBytes(shared, "trial#1")
    for n in (0, 1, 999):
        before = shared.current_bytes
        view.put(f"events/{n}", (n, b"x" * n))
        assert shared.current_bytes - before == _nbytes((n, b"x" * n))
