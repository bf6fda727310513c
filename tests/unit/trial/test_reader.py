"""The value reader over in-memory storage: coalesced reads, torn records, prefetch, copies."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evaluator.errors import TensorUnavailableForStep
from evaluator.formats.keys import event_key
from evaluator.modes import ModeKeys
from evaluator.storage.local import LocalStorage
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from evaluator.trial.tensor import Tensor

TRAIN = ModeKeys.TRAIN


def tensor(e: Any, name: str) -> Tensor:
    """A Tensor over the engine's view; its trial is a stand-in with a name and nothing else."""
    return Tensor(name, SimpleNamespace(name="job"), view=e.view)  # type: ignore[arg-type]


def record_fetches(e: Any) -> list[tuple[str, int, int]]:
    """The ranged reads of the engine's storage from now on, as (key, start, end)."""
    fetched: list[tuple[str, int, int]] = []
    read_range = e.storage.read_range

    async def recording(key: str, start: int, end: int) -> bytes:
        fetched.append((key, start, end))
        return await read_range(key, start, end)

    e.storage.read_range = recording
    return fetched


def test_every_record_of_an_event_file_comes_from_one_read(engine: Any) -> None:
    """Reading every tensor of a step costs one ranged read of its event file."""
    e = engine(prefetch_steps=0)
    e.write(0, 1)
    e.poll()
    e.storage.calls.clear()
    for name in e.names:
        np.testing.assert_array_equal(tensor(e, name).value(0), e.value_of(name, 0))
    assert e.storage.calls["read_range"] == 1


def test_a_torn_last_record_is_waited_for_and_read_whole(engine: Any) -> None:
    """An event file whose last record is still being written is read again until it is whole,
    never decoded torn."""
    e = engine(prefetch_steps=0, poll_interval=0.01, missing_event_file_timeout=5)
    e.write(0, sync=False)
    key = event_key(0, "worker_0")
    e.sync(skip=lambda k: k == key)
    whole = e.event_bytes(0)
    e.storage.put(key, whole[:-7])
    e.poll()
    finisher = threading.Timer(0.05, e.storage.put, (key, whole))
    finisher.start()
    try:
        np.testing.assert_array_equal(tensor(e, "c").value(0), e.value_of("c", 0))
    finally:
        finisher.join()
    assert e.storage.calls["read_range"] >= 2


def test_an_event_file_that_never_comes_names_the_read_value(engine: Any) -> None:
    """When the event file an index names does not appear in time, the error names the tensor,
    the step and the mode that were asked for."""
    e = engine(prefetch_steps=0, poll_interval=0.01, missing_event_file_timeout=0.05)
    e.write(3, sync=False)
    e.sync(skip=lambda k: k == event_key(3, "worker_0"))
    e.poll()
    with pytest.raises(TensorUnavailableForStep) as caught:
        tensor(e, "b").value(3, mode=TRAIN)
    assert (caught.value.tname, caught.value.step, caught.value.mode) == ("b", 3, TRAIN)


def test_walking_the_steps_in_order_fetches_the_next_files_ahead(
    engine: Any, wait_until: Any
) -> None:
    """Once two reads show a walk through the steps, the next prefetch_steps event files are
    fetched unasked, and every file of the walk is still read only once."""
    e = engine(prefetch_steps=2)
    e.write(*range(6))
    e.poll()
    e.storage.calls.clear()
    tensor(e, "a").value(0)
    tensor(e, "a").value(1)
    ahead = [event_key(s, "worker_0") for s in (2, 3)]
    assert wait_until(lambda: all(e.cache.raw.get(k) is not None for k in ahead))
    assert e.storage.calls["read_range"] == 4
    for step in range(2, 6):
        np.testing.assert_array_equal(tensor(e, "a").value(step), e.value_of("a", step))
    assert wait_until(lambda: e.storage.calls["read_range"] == 6)


def test_a_read_out_of_order_fetches_nothing_ahead(engine: Any) -> None:
    """Random access reads only the files it needs: prefetching would waste reads."""
    e = engine(prefetch_steps=2)
    e.write(*range(5))
    e.poll()
    e.storage.calls.clear()
    tensor(e, "a").value(3)
    tensor(e, "a").value(1)
    time.sleep(0.05)  # what a prefetch would have needed to start
    assert e.storage.calls["read_range"] == 2


@pytest.mark.parametrize("raw_cache_mb", [0.0, 128.0])
def test_a_value_read_again_is_a_private_copy(engine: Any, raw_cache_mb: float) -> None:
    """Values are private copies, from the value cache and the byte cache alike: a rule
    changing one in place does not change what the next read returns."""
    e = engine(prefetch_steps=0, raw_cache_mb=raw_cache_mb)
    e.write(0)
    e.poll()
    t = tensor(e, "a")
    # By step alone (the records decoded in a file), and naming the worker (the general
    # path, where a value read again comes from the value cache when no bytes are held).
    for read in (lambda: t.value(0), lambda: t.value(0, worker="worker_0")):
        for _ in range(3):
            got = read()
            np.testing.assert_array_equal(got, e.value_of("a", 0))
            got[:] = -1
    if not raw_cache_mb:
        assert e.cache.values.hits >= 1


def test_reductions_are_computed_once_from_the_raw_value(engine: Any) -> None:
    """A reduction not saved by the hook is computed from the raw value, then answered from the
    reductions cache."""
    e = engine(prefetch_steps=0)
    e.write(0)
    e.poll()
    t = tensor(e, "b")
    assert t.reduction_value(0, "max") == e.value_of("b", 0).max()
    hits = e.cache.reductions.hits
    assert t.reduction_value(0, "max") == e.value_of("b", 0).max()
    assert e.cache.reductions.hits == hits + 1


def test_the_files_records_are_decoded_for_the_tensors_read_at_the_last_step(
    engine: Any,
) -> None:
    """A walk that reads some tensors at every step gets each value right when the set it
    reads changes, when a tensor's shape changes at one step, and from copies it may change."""
    e = engine(prefetch_steps=0)
    e.write(0, 1, 2)
    e.writer.write_step(
        3, {"a": np.zeros((2, 2), np.float32), "b": e.value_of("b", 3), "c": e.value_of("c", 3)}
    )
    e.write(4, 5)
    e.poll()
    plan = {0: "ab", 1: "ab", 2: "bc", 3: "abc", 4: "a", 5: "abc"}
    for step, names in plan.items():
        for name in names:
            got = tensor(e, name).value(step)
            want = (
                np.zeros((2, 2), np.float32) if (step, name) == (3, "a") else e.value_of(name, step)
            )
            np.testing.assert_array_equal(got, want)
            assert got.flags.writeable
            got[...] = -1  # a private copy: the next read is unchanged
            np.testing.assert_array_equal(tensor(e, name).value(step), want)


def test_threads_reading_different_steps_each_get_their_own_values(engine: Any) -> None:
    """Rules in several threads share the reader: values never cross between their files."""
    e = engine(prefetch_steps=0)
    e.write(*range(40))
    e.poll()
    errors: list[str] = []

    def walk(steps: range) -> None:
        for _ in range(5):
            for step in steps:
                for name in e.names:
                    got = tensor(e, name).value(step)
                    if not np.array_equal(got, e.value_of(name, step)):
                        errors.append(f"{name}@{step}")

    threads = [threading.Thread(target=walk, args=(range(k, 40, 2),)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("prefetch_steps", [0, 2])
def test_a_rule_reading_one_tensor_fetches_that_record_not_the_whole_file(
    engine: Any, prefetch_steps: int
) -> None:
    """After the first step, a walk that reads one tensor per step fetches only its record
    (fetched ahead too); a tensor it did not read before is still read right."""
    e = engine(prefetch_steps=prefetch_steps)
    e.write(*range(8))
    e.poll()
    fetched = record_fetches(e)
    for step in range(7):
        np.testing.assert_array_equal(tensor(e, "b").value(step), e.value_of("b", step))
    b_record = e.state.sole_file[3].lengths[e.state.sole_file[3].layout.position["b"]]
    first = event_key(0, "worker_0")
    lo, hi = e.state.event_spans[first]
    sizes = {key: end - start for key, start, end in fetched}
    assert sizes[first] == hi - lo > 2 * b_record  # nothing known yet: every record
    assert all(sizes[event_key(s, "worker_0")] == b_record for s in range(2, 7))
    np.testing.assert_array_equal(tensor(e, "a").value(6), e.value_of("a", 6))
    np.testing.assert_array_equal(tensor(e, "c").value(6), e.value_of("c", 6))


def test_walking_a_trial_again_and_again_reads_each_file_once_per_walk(engine: Any) -> None:
    """With a byte cache holding one file, every walk over every tensor fetches each event
    file once, whole, however many walks came before: values kept in the value cache never
    stand in for the first read of a file whose other records follow (which would leave the
    file unread and make the reads after it one by one)."""
    e = engine(prefetch_steps=0, raw_cache_mb=400 / 2**20)
    e.write(*range(6))
    e.poll()
    fetched = record_fetches(e)
    whole = [
        (event_key(s, "worker_0"), *e.state.event_spans[event_key(s, "worker_0")]) for s in range(6)
    ]
    for walk in range(4):
        fetched.clear()
        for step in range(6):
            for name in e.names:
                np.testing.assert_array_equal(tensor(e, name).value(step), e.value_of(name, step))
        assert fetched == whole, walk


def test_a_file_read_again_for_other_records_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk reading one tensor fetches its record alone (local folders too); a walk over
    the same steps reading another tensor finds the files cached without its record and
    fetches them whole, so that a third walk, for a third tensor, fetches nothing."""
    writer = TrialWriter(tmp_path)
    writer.write_collections([])
    for step in range(5):
        writer.write_step(
            step, {n: np.full(100, step + k, np.float64) for k, n in enumerate("abc")}
        )
    writer.end_training()
    fetched: list[tuple[str, int, int]] = []
    read = LocalStorage.read_range_sync

    def recording(self: LocalStorage, key: str, start: int, end: int) -> bytes:
        fetched.append((key, start, end))
        return read(self, key, start, end)

    def walk(name: str, first: float) -> list[tuple[str, int]]:
        fetched.clear()
        for step in range(5):
            assert trial.tensor(name).value(step)[0] == step + first
        return [(key, end - start) for key, start, end in fetched]

    monkeypatch.setattr(LocalStorage, "read_range_sync", recording)
    trial = create_trial(str(tmp_path))
    try:
        keys = [event_key(s, "worker_0") for s in range(5)]
        whole = {k: v[1] - v[0] for k, v in trial._state.event_spans.items()}
        sizes = dict(walk("b", 1))
        assert all(sizes[k] < whole[k] / 2 for k in keys[2:])  # b's record alone
        # Step 0's file was read whole by the first walk (nothing was predicted yet).
        assert walk("c", 2) == [(k, whole[k]) for k in keys[1:]]
        assert walk("a", 0) == []
    finally:
        trial.close()
