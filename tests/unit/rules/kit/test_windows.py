"""WindowedRows: window results equal the per-step numbers bit for bit, or none at all."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evaluator.engine.reads import observe_reads
from evaluator.engine.reductions import compute_reduction
from evaluator.rules.kit.windows import FLOATS, WindowedRows
from evaluator.testing import compute_reductions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256,), (7, 13), (1,), (3, 2, 5)])
def test_row_reductions_equal_the_per_step_reductions(
    make_trial: Callable[..., Any], dtype: Any, shape: tuple[int, ...]
) -> None:
    """mean |x| and the variance of each row equal reduction_value's, exactly."""
    rng = np.random.default_rng(11)
    steps = {s: {"t": (rng.standard_normal(shape) * 10**s).astype(dtype)} for s in range(6)}
    trial = make_trial(steps)
    means = WindowedRows(trial, lambda rows: np.mean(np.absolute(rows), axis=1))
    variances = WindowedRows(trial, lambda rows: np.var(rows, axis=1))
    for step in range(6):
        value = trial.tensor("t").value(step)
        assert means.get("t", step, ["t"]) == compute_reduction(value, "mean", True)
        assert variances.get("t", step, ["t"]) == compute_reduction(value, "variance")


def test_windows_follow_the_steps_and_count_reads(make_trial: Callable[..., Any]) -> None:
    """A small budget gives several windows; every result handed out is one read."""
    trial = make_trial({s: {"t": np.full(64, s, np.float32)} for s in range(10)})
    rows = WindowedRows(trial, lambda r: r[:, 0], max_bytes=3 * 64 * 4)
    seen: list[tuple[str, int]] = []
    with observe_reads(lambda name, step, _value: seen.append((name, step))):
        got = [rows.get("t", s, ["t"]) for s in range(10)]
    assert got == list(range(10))
    assert seen == [("t", s) for s in range(10)]
    rows.get("t", 6, ["t"])  # the window of steps 6, 7, 8
    assert rows.steps_before("t", 8, 2) == [6, 7]
    assert rows.steps_before("t", 6, 1) is None  # the first row of its window


def test_without_a_batch_read_the_per_step_api_answers() -> None:
    """A trial without ``columns`` (smdebug's) gets None by default: the rule reads step by
    step."""
    rows = WindowedRows(SimpleNamespace(), lambda r: r)
    assert rows.get("t", 0, ["t"]) is None


def test_without_a_window_row_compute_runs_over_the_value_alone(
    make_trial: Callable[..., Any],
) -> None:
    """With ``alone_dtypes``, a trial without a batch read (smdebug's, here ours with the
    batch read hidden) gets ``compute`` over each step's value as one row: the window's
    numbers, bit for bit, each reported as one read; other dtypes and missing values get
    None."""
    rng = np.random.default_rng(5)
    steps = {s: {"t": rng.standard_normal((4, 9)).astype(np.float32)} for s in range(5)}
    steps[3]["i"] = np.arange(4)
    trial = make_trial(steps)
    plain = SimpleNamespace(tensor=trial.tensor, steps=trial.steps)

    def mean_abs(rows: np.ndarray) -> np.ndarray:
        return np.mean(np.absolute(rows), axis=1)

    batched = WindowedRows(trial, mean_abs)
    alone = WindowedRows(plain, mean_abs, alone_dtypes=[np.dtype(np.float32)])
    seen: list[tuple[str, int]] = []
    with observe_reads(lambda name, step, _value: seen.append((name, step))):
        got = [alone.get("t", s, ["t"]) for s in range(5)]
    assert got == [batched.get("t", s, ["t"]) for s in range(5)]
    assert seen == [("t", s) for s in range(5)]
    assert alone.get("i", 3, ["i"]) is None  # an int64 value: not a dtype asked for
    assert alone.get("i", 2, ["i"]) is None  # not saved at that step


def test_other_dtypes_and_empty_tensors_get_no_result(make_trial: Callable[..., Any]) -> None:
    """Only the dtypes asked for, and no empty tensors, are computed over windows."""
    trial = make_trial(
        {s: {"i": np.arange(4, dtype=np.int64), "e": np.zeros(0, np.float32)} for s in range(3)}
    )
    rows = WindowedRows(trial, lambda r: r.sum(axis=1))
    assert rows.get("i", 1, ["i", "e"]) is None
    assert rows.get("e", 1, ["i", "e"]) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_row_percentile_spreads_equal_the_per_step_spreads(
    make_trial: Callable[..., Any], dtype: Any
) -> None:
    """The 95th - 5th percentile spread of each row equals PoorWeightInitialization's."""
    rng = np.random.default_rng(4)
    steps = {s: {"g": (rng.standard_normal((6, 5)) * 100).astype(dtype)} for s in range(5)}
    trial = make_trial(steps)
    spreads = WindowedRows(
        trial,
        lambda rows: [float(h - lo) for lo, h in zip(*np.percentile(rows, [5, 95], axis=1))],
        dtypes=[np.dtype(dtype)],
    )
    for step in range(5):
        low, high = np.percentile(trial.tensor("g").value(step), [5, 95])
        assert spreads.get("g", step, ["g"]) == float(high - low)


def test_a_named_reduction_answers_as_reduction_value(make_trial: Callable[..., Any]) -> None:
    """With ``reduction``, a step the window has no row for answers the hook's saved
    reduction where it saved one (beside the raw value or alone), the raw value's otherwise,
    and None for a shape only; window rows are compute's, and with or without a batch read
    the numbers are reduction_value's."""
    rng = np.random.default_rng(5)
    raw = {s: (rng.standard_normal(16) * (s + 1)).astype(np.float32) for s in range(6)}
    saved = {s: compute_reductions(np.full(4, 7.0 + s), ["abs_mean"]) for s in (2, 4)}
    trial = make_trial(
        {s: ({} if s == 4 else {"t": raw[s]}) for s in range(6)},
        reductions={s: {"t": r} for s, r in saved.items()},
        shapes={5: {"shape_only": (3,)}},
    )
    expected = [trial.tensor("t").reduction_value(s, "mean", abs=True) for s in range(6)]
    assert expected[2] == 9.0 and expected[4] == 11.0  # the saved ones
    for columns in (True, False):
        if not columns:
            trial = SimpleNamespace(tensor=trial.tensor)  # no batch read
        rows = WindowedRows(
            trial, lambda r: np.mean(np.absolute(r), axis=1), reduction=("mean", True)
        )
        got = [rows.get("t", s, ["t", "shape_only"]) for s in range(6)]
        assert [float(g) for g in got] == [float(np.asarray(e).reshape(-1)[0]) for e in expected]
        assert rows.get("shape_only", 5, ["t", "shape_only"]) is None


def test_empty_values_are_computed_when_asked(make_trial: Callable[..., Any]) -> None:
    """Empty values get no result unless ``empty``: then compute covers them too, over
    windows and alone."""
    trial = make_trial({s: {"e": np.zeros((0, 3), np.float32)} for s in range(3)})

    def shapes(rows: np.ndarray) -> list[tuple[int, ...]]:
        return [rows.shape[1:]] * len(rows)

    assert WindowedRows(trial, shapes).get("e", 1, ["e"]) is None
    assert WindowedRows(trial, shapes, alone_dtypes=None).get("e", 1, ["e"]) is None
    assert WindowedRows(trial, shapes, empty=True).get("e", 1, ["e"]) == (0,)
    alone = SimpleNamespace(tensor=trial.tensor)  # no batch read
    assert WindowedRows(alone, shapes, alone_dtypes=FLOATS).get("e", 2, ["e"]) is None
    rows = WindowedRows(alone, shapes, flatten=False, alone_dtypes=FLOATS, empty=True)
    assert rows.get("e", 2, ["e"]) == (0, 3)


def _differences(rows: np.ndarray) -> list[float | None]:
    """Per row: its first element minus the first element of the row before (None: none)."""
    return [None, *(float(d) for d in np.diff(rows[:, 0]))]


def test_rows_before_come_from_the_window_or_are_read_alone(
    make_trial: Callable[..., Any],
) -> None:
    """With ``before``, a result computed with the earlier steps' rows is the same from the
    window (the previous window's last rows kept before the next one's first) and from the
    values read alone; ``step`` and each earlier step count as reads either way; rows before
    that are not the ones asked for are not used."""
    trial = make_trial({s: {"t": np.full(64, s * s, np.float32)} for s in range(10)})
    plain = SimpleNamespace(tensor=trial.tensor, steps=trial.steps)
    for source in (trial, plain):
        rows = WindowedRows(
            source, _differences, max_bytes=3 * 64 * 4, dtypes=None, alone_dtypes=None, before=1
        )
        seen: list[tuple[str, int]] = []
        with observe_reads(lambda name, step, _value, seen=seen: seen.append((name, step))):
            got = [rows.get("t", s, ["t"], earlier=[s - 1]) for s in range(1, 10)]
        assert got == [float(2 * s - 1) for s in range(1, 10)]
        assert seen == [("t", s) for p in range(1, 10) for s in (p, p - 1)]
        assert rows.get("t", 9, ["t"], earlier=[7]) == 81 - 49  # not the row before: alone


def test_rows_before_stop_at_a_value_of_another_shape(make_trial: Callable[..., Any]) -> None:
    """Read alone, an earlier value of another shape ends the rows compute sees (it and the
    ones before it are left out); a missing value gives None."""
    trial = make_trial(
        {0: {"t": np.zeros(3)}, 1: {"t": np.zeros(2)}, 2: {"t": np.ones(2)}, 3: {"u": np.ones(1)}}
    )
    rows = WindowedRows(trial, lambda r: [len(r)] * len(r), dtypes=(), alone_dtypes=None, before=2)
    assert rows.get("t", 2, ["t"], earlier=[0, 1]) == 2
    assert rows.get("t", 3, ["t"], earlier=[1, 2]) is None  # not saved at step 3


def test_read_alone_earlier_values_stop_where_the_result_is_settled(
    make_trial: Callable[..., Any],
) -> None:
    """Read alone, the earlier values are read the nearest first and, with ``further``, only
    while it says the result can still change: a run of equal values is followed back to the
    first different one, which is the last read."""
    trial = make_trial({s: {"t": np.full(4, min(s, 3), np.float32)} for s in range(6)})
    alone = SimpleNamespace(tensor=trial.tensor, steps=trial.steps)

    def equal_run(rows: np.ndarray) -> list[int]:
        """Per row: how many rows, back from it, hold its value."""
        runs = []
        for i, row in enumerate(rows):
            back = 0
            while back <= i and (rows[i - back] == row).all():
                back += 1
            runs.append(back)
        return runs

    rows = WindowedRows(alone, equal_run, dtypes=None, alone_dtypes=None, before=4)
    for step, expected, reads in [(5, 3, [5, 4, 3, 2]), (2, 1, [2, 1])]:
        seen: list[tuple[str, int]] = []
        with observe_reads(lambda name, s, _value, seen=seen: seen.append((name, s))):
            got = rows.get(
                "t",
                step,
                ["t"],
                earlier=list(range(max(0, step - 4), step)),
                further=lambda same, n: same == n,
            )
        assert got == expected and seen == [("t", s) for s in reads]
