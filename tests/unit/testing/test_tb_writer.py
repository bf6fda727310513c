"""evaluator.testing.tb_writer: scalar logs that TensorBoard itself and our trial read back."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evaluator.modes import ModeKeys
from evaluator.testing.tb_writer import read_scalars, write_scalars
from evaluator.trial import create_trial


def test_round_trip_keeps_steps_values_and_wall_times(tmp_path: Path) -> None:
    """What write_scalars writes, read_scalars gives back (float32 values, given wall times)."""
    scalars = {"train/loss": [(1, 0.5, 10.0), (2, math.inf, 11.5)], "eval/loss": [(2, 0.25)]}
    write_scalars(tmp_path, scalars, start_time=100.0)
    assert read_scalars(tmp_path) == {
        "train/loss": [(1, 0.5, 10.0), (2, math.inf, 11.5)],
        "eval/loss": [(2, 0.25, 102.0)],
    }


def test_the_trial_and_tensorboard_read_the_same(tmp_path: Path) -> None:
    """TensorBoard's EventAccumulator sees the values; our trial maps the Trainer's tags."""
    pytest.importorskip("tensorboard")
    from tests.support.tb_logs import oracle_values

    write_scalars(tmp_path, {"train/loss": [(10, 2.0), (20, 1.5)], "eval/loss": [(20, 1.75)]})
    assert oracle_values(tmp_path)["train/loss"] == {10: 2.0, 20: 1.5}
    trial = create_trial(str(tmp_path), idle_scans_to_complete=1, poll_interval=0.05)
    try:
        loss = trial.tensor("loss")
        assert loss.steps(mode=ModeKeys.TRAIN) == [10, 20]
        assert float(loss.value(20, mode=ModeKeys.EVAL)) == 1.75
    finally:
        trial.close()
