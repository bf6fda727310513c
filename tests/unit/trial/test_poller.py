"""The poller over in-memory storage: wake-ups, back-off, the end marker, idle scans."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from evaluator.formats.keys import index_key
from evaluator.modes import ModeKeys, StepState
from evaluator.storage.base import ObjectInfo

GLOBAL = ModeKeys.GLOBAL


def test_a_background_poll_that_brings_the_step_wakes_its_waiter(engine: Any) -> None:
    """A caller sleeping on the cache for a step wakes as soon as a poll applies it."""
    e = engine(poll_interval=0.01, max_poll_interval=0.02)
    e.write(0)
    e.poll()
    woke_after: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        with e.cache.lock:  # checked and waited for under the lock: no wake-up can slip between
            while e.state.has_passed_step(1, GLOBAL) != StepState.AVAILABLE:
                e.cache.wait_for_change(30)  # far longer than the test may take
        woke_after.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    e.poller.start(e.loop)
    time.sleep(0.05)  # the poller has polled idly a few times; the waiter still sleeps
    assert not woke_after
    e.write(1)
    thread.join(timeout=5)
    assert not thread.is_alive() and woke_after[0] < 5
    e.poller.stop()


def test_the_interval_backs_off_while_nothing_is_new_and_resets_on_news(engine: Any) -> None:
    """Idle polls wait 1.5x longer each time, up to max_poll_interval; news resets the wait."""
    e = engine(poll_interval=1.0, max_poll_interval=4.0)
    e.write(0)
    e.poll()
    enough = threading.Event()

    def on_sleep(count: int) -> None:
        if count == 6:
            e.write(1)  # the 7th poll brings news
        elif count == 8:
            enough.set()

    e.on_sleep = on_sleep
    e.poller.start(e.loop)
    assert enough.wait(5)
    e.poller.stop()
    assert e.sleeps[:8] == [1.5, 2.25, 3.375, 4.0, 4.0, 4.0, 1.0, 1.5]


def test_polling_stops_once_every_step_is_loaded(engine: Any, wait_until: Any) -> None:
    """The background poller ends by itself when a poll finds the end marker."""
    e = engine(poll_interval=0.01)
    e.write(0)
    e.poller.start(e.loop)
    e.end()
    assert wait_until(lambda: not e.poller.running)
    assert e.state.loaded_all_steps and e.poller.error is None


def test_first_sight_of_the_end_marker_lists_once_more(engine: Any) -> None:
    """A file that landed after the listing passed its key, but before the marker, is still read
    by the second listing made on first sight of training_job_end.ts."""
    e = engine()
    e.write(0, 1)
    e.poll()
    late = index_key(2, "worker_0")
    e.write(2)
    e.end()
    hiding = HideOnce(e.storage, late)
    e.source.storage = hiding  # type: ignore[assignment]
    e.storage.calls.clear()
    assert e.poll()
    assert e.storage.calls["list"] == 2  # the listing that saw the marker, then one more
    assert e.state.loaded_all_steps
    assert e.state.all_steps(GLOBAL) == [0, 1, 2]
    assert e.state.has_passed_step(2, GLOBAL) == StepState.AVAILABLE


def test_after_the_end_was_seen_a_poll_is_one_listing(engine: Any) -> None:
    """Only the first sight of the end marker costs a second listing."""
    e = engine()
    e.write(0)
    e.end()
    e.poll()
    e.storage.calls.clear()
    assert not e.poll()
    assert e.storage.calls["list"] == 1


def test_an_end_marker_seen_late_still_reads_the_last_steps(engine: Any) -> None:
    """Steps written between two polls and then the marker are all read, and then all complete."""
    e = engine()
    e.write(0)
    e.poll()
    assert not e.state.loaded_all_steps
    e.write(1, 2)
    e.end()
    assert e.poll()
    assert e.state.loaded_all_steps and e.state.last_complete_step == 2


def test_idle_scans_a_poll_interval_apart_complete_a_trial_without_marker(engine: Any) -> None:
    """With idle_scans_to_complete=2, the third idle scan (each one poll_interval after the last)
    declares every step complete; news in between starts the count again."""
    e = engine(poll_interval=0.02, idle_scans_to_complete=2)
    e.write(0)
    e.poll()

    def idle_scan() -> None:
        time.sleep(0.025)
        assert not e.poll()

    idle_scan()
    idle_scan()
    e.write(1)
    time.sleep(0.025)
    assert e.poll()  # news: the count restarts
    idle_scan()
    idle_scan()
    assert not e.state.loaded_all_steps
    idle_scan()
    assert e.state.loaded_all_steps and e.state.last_complete_step == 1


def test_idle_scans_in_quick_succession_count_once(engine: Any) -> None:
    """Scans closer together than poll_interval (several rules asking at once) count once."""
    e = engine(poll_interval=60.0, idle_scans_to_complete=1)
    e.write(0)
    e.poll()
    for _ in range(5):
        e.poll()
    assert not e.state.loaded_all_steps


def test_a_failing_poll_is_handed_to_the_waiters(engine: Any, wait_until: Any) -> None:
    """When polling fails, the error is kept for callers and waiters are woken, not left asleep."""
    e = engine(poll_interval=0.01)
    e.write(0)
    e.poll()
    e.source.storage = Failing(e.storage)  # type: ignore[assignment]
    woke = threading.Event()

    def waiter() -> None:
        with e.cache.lock:
            while e.poller.error is None:
                e.cache.wait_for_change(30)
        woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    e.poller.start(e.loop)
    assert woke.wait(5)
    thread.join(timeout=5)
    assert isinstance(e.poller.error, OSError)
    assert wait_until(lambda: not e.poller.running)  # polling ends with the error


class HideOnce:
    """A storage whose first listing leaves out one key (it landed just after being passed)."""

    def __init__(self, storage: Any, key: str) -> None:
        self._storage = storage
        self._hidden = key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        hidden, self._hidden = self._hidden, ""
        async for info in self._storage.list_after(prefix, start_after):
            if info.key != hidden:
                yield info


class Failing:
    """A storage whose listings fail."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        raise OSError("listing failed")
        yield  # pragma: no cover


def test_a_long_listing_is_applied_in_chunks_with_the_same_answers(
    engine: Any, monkeypatch: Any
) -> None:
    """With chunks of 3 index files, a listing of 8 is applied part by part (waiters see the
    first steps early) and the trial knows what one whole apply would have told it."""
    import evaluator.sources.smdebug.source as source

    monkeypatch.setattr(source, "INDEX_CHUNK", 3)
    e = engine(prefetch_steps=0)
    e.write(*range(8))
    e.end()
    applied: list[int] = []
    apply = e.cache.apply

    def counting(files: Any, last_key: Any, *, ended: bool, part: bool = False) -> bool:
        files = list(files)
        applied.append(len(files))
        if part:  # the listing token moves only with the scan's last part
            assert e.state.last_index_token is None
        return apply(files, last_key, ended=ended, part=part)

    e.cache.apply = counting
    assert e.poll() is True
    assert applied[:2] == [3, 3] and sum(applied) == 8
    assert e.state.steps(ModeKeys.TRAIN) == list(range(8))
    assert e.state.loaded_all_steps
    np.testing.assert_array_equal(
        e.reader.read_value(
            (e.state.sole_file[5].event_key, *e.state.sole_file[5].location("b")),
            ("b", 5, ModeKeys.GLOBAL),
        ),
        e.value_of("b", 5),
    )
