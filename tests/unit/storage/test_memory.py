"""In-memory backend: growing while read, and counting requests the way S3 bills them."""

from __future__ import annotations

import threading

from evaluator.storage import MemoryStorage
from tests.support import collect, run


def test_counts_one_list_per_page_and_one_call_per_read() -> None:
    """``calls`` counts a page as one ``list`` and each read, range and exists check once."""
    storage = MemoryStorage({f"k{i}": b"x" for i in range(5)}, page_size=2)

    async def body() -> None:
        await collect(storage)  # pages of 2, 2 and 1
        await collect(storage, "nothing/")  # an idle poll
        await storage.read("k1")
        await storage.read_range("k1", 0, 1)
        await storage.exists("k9")

    run(body())
    assert storage.calls == {"list": 4, "read": 1, "read_range": 1, "exists": 1}


def test_a_full_last_page_costs_no_extra_list() -> None:
    """Exactly ``page_size`` keys are listed with a single request, as S3 does."""
    storage = MemoryStorage({f"k{i}": b"x" for i in range(3)}, page_size=3)
    assert len(run(collect(storage))) == 3
    assert storage.calls["list"] == 1


def test_objects_added_during_a_listing_appear_when_they_sort_later() -> None:
    """A key put while a listing runs shows up on a later page if it sorts after the cursor."""
    storage = MemoryStorage({"index/1": b"", "index/2": b"", "index/3": b""}, page_size=1)

    async def body() -> list[str]:
        keys = []
        async for info in storage.list_after("index/"):
            keys.append(info.key)
            if info.key == "index/2":
                storage.put("index/0", b"")  # sorts before the cursor: missed, like S3
                storage.put("index/4", b"")
        return keys

    assert run(body()) == ["index/1", "index/2", "index/3", "index/4"]


def test_replace_and_delete_are_seen_by_the_next_read() -> None:
    """``put`` replaces an object and ``delete`` removes it."""
    storage = MemoryStorage({"k": b"old"})
    storage.put("k", b"new")
    assert run(storage.read("k")) == b"new"
    storage.delete("k")
    storage.delete("k")
    assert run(storage.exists("k")) is False
    assert run(collect(storage)) == []


def test_a_writer_thread_and_a_polling_reader_see_every_key_once() -> None:
    """Polling with ``start_after`` while another thread writes loses and repeats nothing."""
    storage = MemoryStorage(page_size=7)
    expected = [f"index/{i:06d}" for i in range(300)]

    def writer() -> None:
        for key in expected:
            storage.put(key, key.encode())

    async def poll() -> list[str]:
        seen: list[str] = []
        for _ in range(10_000):  # bounded: the writer finishes long before
            page = await collect(storage, "index/", seen[-1] if seen else None)
            seen += [info.key for info in page]
            if len(seen) == len(expected):
                break
        return seen

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = run(poll())
    finally:
        thread.join(timeout=30)
    assert seen == expected
