"""Trial.columns: the batch read rules use; same values as Tensor.value, bounded windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.engine.columns import read_columns
from evaluator.engine.reads import observe_reads
from evaluator.modes import ModeKeys
from evaluator.storage.local import LocalStorage
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial

MiB = 1024 * 1024


@pytest.fixture
def trial(tmp_path: Path) -> Any:
    """Six TRAIN steps: ``w`` everywhere, ``r`` with saved reductions at step 2, ``s`` whose
    shape changes at step 4, ``x`` a shape only at step 3."""
    writer = TrialWriter(tmp_path)
    writer.write_collections([])
    rng = np.random.default_rng(5)
    for step in range(6):
        tensors = {
            "w": rng.standard_normal((3, 4)).astype(np.float32),
            "r": rng.standard_normal(8),
            "s": np.arange(4 if step < 4 else 5, dtype=np.float64),
        }
        shapes = None
        if step != 3:
            tensors["x"] = np.full(2, step, dtype=np.int32)
        else:
            shapes = {"x": (2,)}
        writer.write_step(
            step,
            tensors,
            mode=ModeKeys.TRAIN,
            mode_step=step,
            reductions={"r": {"mean": np.float64(0.5)}} if step == 2 else None,
            shapes=shapes,
        )
    writer.end_training()
    opened = create_trial(str(tmp_path))
    yield opened
    opened.close()


def _event_bytes(trial: Any, step: int) -> int:
    return int(trial._state.event_bytes(step, ModeKeys.GLOBAL))


def test_columns_hold_what_value_reads_row_by_row(trial: Any) -> None:
    """Each column stacks the values Tensor.value returns, step by step."""
    got = trial.columns(["w", "x"], trial.steps())
    assert got.steps == list(range(6))
    for name in ("w", "x"):
        column = got.get(name)
        for row, step in enumerate(column.steps):
            expected = trial.tensor(name).value(step)
            assert column.values[row].dtype == expected.dtype
            np.testing.assert_array_equal(column.values[row], expected)
            assert column.row(step) == row


def test_steps_without_a_raw_value_or_with_saved_reductions_are_left_out(trial: Any) -> None:
    """A shape-only step and a step with saved reductions have no row; a tensor whose shape
    changes has no column; unknown names are ignored."""
    got = trial.columns(["x", "r", "s", "nope"], trial.steps())
    assert got.get("x").steps == [0, 1, 2, 4, 5]
    assert got.get("r").steps == [0, 1, 3, 4, 5]
    assert got.get("s") is None and got.get("nope") is None


def test_mode_steps_are_read_with_their_mode(trial: Any) -> None:
    """With a mode, steps are that mode's steps."""
    got = trial.columns(["w"], [1, 2], ModeKeys.TRAIN)
    np.testing.assert_array_equal(got.get("w").values[1], trial.tensor("w").value(2))


def test_a_window_stops_once_max_bytes_are_held(trial: Any) -> None:
    """Reading stops after the step that reaches max_bytes; at least one step is read."""
    one_step = 3 * 4 * 4
    got = trial.columns(["w"], trial.steps(), max_bytes=2 * one_step)
    assert got.steps == [0, 1]
    assert trial.columns(["w"], trial.steps(), max_bytes=1).steps == [0]


def test_a_walk_stops_before_the_files_walked_pass_their_bound() -> None:
    """With ``file_bytes``, the walk stops before the step whose files would pass
    ``max_file_bytes``; the first step is read whatever its size."""

    def read(name: str, step: int) -> np.ndarray:
        return np.full(2, step, np.float32)

    def ten(step: int) -> int:
        return 10

    def walk(budget: int) -> list[int]:
        got = read_columns(range(8), ["a"], read, file_bytes=ten, max_file_bytes=budget)
        return list(got.steps)

    assert walk(35) == [0, 1, 2]
    assert walk(30) == [0, 1, 2]
    assert walk(5) == [0]
    assert list(read_columns(range(8), ["a"], read).steps) == list(range(8))


def test_reads_are_counted_only_when_a_row_is_used(trial: Any) -> None:
    """The batch itself reports no reads to the rule's observer; Columns.note reports one."""
    seen: list[tuple[str, int]] = []
    with observe_reads(lambda name, step, _value: seen.append((name, step))):
        got = trial.columns(["w"], trial.steps())
        assert seen == []
        got.note("w", 3)
    assert seen == [("w", 3)]


def test_a_window_ends_before_its_event_files_outgrow_half_the_byte_cache(
    trial: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps of a window are read again right after (another batch, per-step reads): a
    window stops while their event files still fit in half the byte cache, and those reads
    find them there (other records: each file once more, whole)."""
    sizes = [_event_bytes(trial, step) for step in trial.steps()]
    assert all(size > 0 for size in sizes)
    # A byte cache whose half holds the first two steps' files, not three.
    raw_mb = 2 * (sizes[0] + sizes[1] + sizes[2] // 2) / MiB
    small = create_trial(str(tmp_path), raw_cache_mb=raw_mb)
    try:
        got = small.columns(["w"], small.steps())
        assert got.steps == [0, 1]
        fetched: list[str] = []
        read = LocalStorage.read_range_sync

        def recording(self: LocalStorage, key: str, start: int, end: int) -> bytes:
            fetched.append(key)
            return read(self, key, start, end)

        monkeypatch.setattr(LocalStorage, "read_range_sync", recording)
        for step in (0, 1):  # the window's records, again: in the byte cache
            np.testing.assert_array_equal(got.get("w").values[step], small.tensor("w").value(step))
        assert fetched == []
        # Other records of those files: each file fetched once more, whole, then all at hand.
        assert small.columns(["r"], [0, 1]).steps == [0, 1]
        assert len(fetched) <= 2 and len(set(fetched)) == len(fetched)
        fetched.clear()
        for step in (0, 1):
            small.tensor("x").value(step)
        assert fetched == []
        # The default byte cache holds the six steps: one window.
        assert trial.columns(["w"], trial.steps()).steps == list(range(6))
    finally:
        small.close()
