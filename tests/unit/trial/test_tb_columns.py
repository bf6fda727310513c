"""A TensorBoard trial's values held per tag in columns: growth, TensorBoard's rules for
repeated steps and restarts, torn records, and batched reads, against EventAccumulator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evaluator.errors import HistogramValueUnavailable
from evaluator.formats.tensorboard.summary import Histogram
from evaluator.modes import ModeKeys
from evaluator.sources.tensorboard.columns import Series
from evaluator.trial import create_trial
from tests.support.tb_logs import oracle, oracle_values, torch_style

pytest.importorskip("tensorboard")
pytest.importorskip("tensorboardX")


def _h(x: float) -> Histogram:
    buckets = np.array([[x - 1, x, 2.0], [x, x + 1, 1.0]])
    return Histogram(x - 1, x + 1, 3.0, 3 * x, 3 * x * x + 2, buckets)


def test_series_grows_past_its_first_capacity_and_keeps_every_row() -> None:
    """Scalars appended in many blocks and one by one read back at their steps in order."""
    series = Series()
    for block in range(50):
        steps = np.arange(block * 7, block * 7 + 7, dtype=np.int64)
        series.extend_scalars(steps, steps, (steps / 3).astype(np.float32))
    series.add(350, 350, np.float32(9.5))
    snap = series.snapshot()
    assert snap.steps.tolist() == list(range(351))
    assert snap.value(snap.find(200) or 0) == np.float32(200 / 3)
    assert snap.value(snap.find(350) or 0).dtype == np.float32
    column = snap.column()
    assert column is not None and column.dtype == np.float32 and len(column) == 351


def test_repeated_step_takes_the_row_logged_last() -> None:
    """A step logged again (in any order of arrival) answers with the row logged last."""
    series = Series()
    series.extend_scalars(np.array([0, 1, 2]), np.array([0, 1, 2]), np.float32([1, 1, 1]))
    series.add(1, 5, np.float32(2.0))
    series.extend_scalars(np.array([1, 3]), np.array([3, 4]), np.float32([3, 3]))
    snap = series.snapshot()
    assert snap.steps.tolist() == [0, 1, 2, 3]
    assert [float(snap.value(snap.find(s) or 0)) for s in range(4)] == [1, 2, 1, 3]


def test_purge_drops_later_steps_and_leaves_earlier_snapshots_whole() -> None:
    """A purge at step s drops rows of steps >= s; a snapshot taken before still answers
    (readers on another thread never see arrays change under them)."""
    series = Series()
    for s in range(6):
        series.add(s, s, _h(float(s)))
    before = series.snapshot()
    series.purge(3)
    series.add(3, 9, _h(30.0))
    after = series.snapshot()
    assert before.steps.tolist() == list(range(6))
    assert (before.histogram(before.find(4) or 0) or _h(0)).min == 3.0
    assert after.steps.tolist() == [0, 1, 2, 3]
    h = after.histogram(after.find(3) or 0)
    assert h is not None and h.min == 29.0 and h.sum == 90.0
    assert after.column() is None  # histograms have no value column


def test_a_tag_logged_as_two_kinds_keeps_both() -> None:
    """A tag whose values change kind (a float scalar, then a tensor) keeps every value."""
    series = Series()
    series.add(0, 0, np.float32(1.0))
    series.add(1, 1, np.arange(3, dtype=np.int64))
    snap = series.snapshot()
    assert snap.value(snap.find(0) or 0).dtype == np.float32
    assert snap.value(snap.find(1) or 0).tolist() == [0, 1, 2]


def test_histogram_reductions_from_columns_equal_event_accumulator(tmp_path: Path) -> None:
    """Exact histogram reductions (min, max, count, sum, mean, variance, l2) and the buckets,
    read from the columns, equal what EventAccumulator shows for every step."""
    rng = np.random.default_rng(3)
    steps = list(range(0, 40, 3))
    log = torch_style(
        tmp_path,
        scalars={"loss": [(s, 1 / (s + 1)) for s in steps]},
        histograms={"w": [(s, rng.normal(s, 1.0, 200)) for s in steps]},
    )
    with create_trial(str(log)) as trial:
        w = trial.tensor("w")
        assert w.steps() == steps
        for event in oracle(log).Histograms("w"):
            h = event.histogram_value
            s = event.step
            got = {k: float(w.reduction_value(s, k)) for k in ("min", "max", "count", "sum")}
            assert got == {"min": h.min, "max": h.max, "count": h.num, "sum": h.sum}
            assert float(w.reduction_value(s, "mean")) == h.sum / h.num
            variance = max(h.sum_squares / h.num - (h.sum / h.num) ** 2, 0.0)
            assert float(w.reduction_value(s, "variance")) == pytest.approx(variance)
            assert float(w.reduction_value(s, "l2")) == pytest.approx(math.sqrt(h.sum_squares))
            assert w.histogram(s).buckets[:, 2].tolist() == list(h.bucket)
        with pytest.raises(HistogramValueUnavailable):
            w.column()


def test_column_is_every_value_event_accumulator_shows(tmp_path: Path) -> None:
    """``Tensor.column`` (all steps at once) and ``Trial.columns`` give the scalars
    EventAccumulator shows, float32 as logged: the column in step order, the picked steps
    in the order asked."""
    log = torch_style(
        tmp_path, scalars={"loss": [(s, 1 / (s + 1)) for s in range(0, 300, 7)], "lr": [(5, 0.1)]}
    )
    want = oracle_values(log)
    with create_trial(str(log)) as trial:
        column = trial.tensor("loss").column()
        assert column.values.dtype == np.float32
        assert dict(zip(column.steps, column.values.tolist(), strict=True)) == want["loss"]
        picked = trial.columns(["loss", "lr"], [5, 7, 14])
        loss = picked.get("loss")
        assert loss is not None and loss.steps == [7, 14]
        assert loss.values.tolist() == [want["loss"][7], want["loss"][14]]
        assert picked.get("lr") is not None and picked.steps == [5, 7, 14]
        backwards = trial.columns(["loss"], [14, 3, 7]).get("loss")  # rows in the asked order
        assert backwards is not None and backwards.steps == [14, 7]
        assert backwards.values.tolist() == [want["loss"][14], want["loss"][7]]


def test_phases_map_to_global_steps_in_the_column(tmp_path: Path) -> None:
    """With train/validation folders, a GLOBAL column has the global steps (2s, 2s+1) and a
    mode's column its own steps."""
    torch_style(tmp_path / "train", scalars={"loss": [(s, float(s)) for s in range(4)]})
    torch_style(tmp_path / "validation", scalars={"loss": [(s, -float(s)) for s in range(3)]})
    with create_trial(str(tmp_path)) as trial:
        loss = trial.tensor("loss")
        glob = loss.column()
        assert glob.steps == [0, 1, 2, 3, 4, 5, 6] and glob.values.tolist() == [
            0,
            -0,
            1,
            -1,
            2,
            -2,
            3,
        ]
        assert loss.column(mode=ModeKeys.EVAL).steps == [0, 1, 2]
        assert trial.tensor_names(step=6) == ["loss"] and trial.tensor_names(step=7) == []


def test_torn_record_then_the_rest_gives_every_value(tmp_path: Path) -> None:
    """A file cut inside a record reads up to the record before it; once the rest is written,
    a refresh reads on from there and every value equals EventAccumulator's."""
    full = torch_style(tmp_path / "src", scalars={"loss": [(s, s / 10) for s in range(50)]})
    source = next(full.iterdir())
    data = source.read_bytes()
    run = tmp_path / "run"
    run.mkdir()
    target = run / source.name
    target.write_bytes(data[: len(data) // 2 + 5])
    with create_trial(str(run)) as trial:
        first = trial.tensor("loss").steps()
        assert first and first == list(range(len(first))) and len(first) < 50
        target.write_bytes(data)
        trial.refresh_data()
        column = trial.tensor("loss").column()
        assert (
            dict(zip(column.steps, column.values.tolist(), strict=True))
            == (oracle_values(full)["loss"])
        )
