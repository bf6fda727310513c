"""evaluator.rules.kit.modes: Keras' epoch-end logs, values per mode (on Keras-like trials from
tests/support/keras_like.py and on the real hook trials)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import (
    as_training,
    epoch_end_pair,
    is_epoch_end_log,
    mode_of,
    pass_ended,
    value_in_mode,
)
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from tests.support.keras_like import WEIGHT, hook_trial, write_keras_like

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


def test_the_writer_reproduces_keras_duplicate_loss_entries(tmp_path: Path) -> None:
    """The epoch-end index file lists `loss` twice and the later entry (training mean) wins."""
    root = write_keras_like(tmp_path / "t", epochs=1, train_batches=4, val_batches=2)
    index = sorted((root / "index").rglob("*.json"))[-1]
    names = [t["tensorname"] for t in json.loads(index.read_text())["tensor_payload"]]
    assert names.count("loss") == 2 and "val_loss" in names
    with create_trial(str(root)) as trial:
        last_train = float(trial.tensor("loss").value(3)[0])
        assert float(trial.tensor("loss").value(5)[0]) == pytest.approx(last_train)


def test_is_epoch_end_log_only_at_eval_steps_with_the_val_counterpart(
    keras_like: Callable[..., Any],
) -> None:
    """Only the last EVAL step of each epoch is an epoch-end log of `loss`, never of `val_loss`."""
    trial = keras_like(epochs=2, train_batches=4, val_batches=2)
    ends = [s for s in trial.steps() if is_epoch_end_log(trial, "loss", s)]
    assert ends == [5, 11]
    assert not any(is_epoch_end_log(trial, "val_loss", s) for s in trial.steps())
    assert not is_epoch_end_log(trial, WEIGHT, 5)


def test_value_in_mode_skips_the_epoch_end_log_and_other_modes(
    keras_like: Callable[..., Any],
) -> None:
    """The epoch-end `loss` is neither an EVAL nor a TRAIN value; other modes' values are None."""
    trial = keras_like(epochs=1, train_batches=4, val_batches=2)
    assert value_in_mode(trial, "loss", 0, TRAIN) is not None
    assert value_in_mode(trial, "loss", 0, EVAL) is None
    assert value_in_mode(trial, "loss", 4, EVAL) is not None
    assert value_in_mode(trial, "loss", 4, TRAIN) is None
    assert value_in_mode(trial, "loss", 5, EVAL) is None
    assert value_in_mode(trial, "loss", 5, TRAIN) is None
    train, val = epoch_end_pair(trial, "loss", 5)
    assert train == pytest.approx(float(np.mean([trial.tensor("loss").value(3)])))
    assert val == pytest.approx(float(trial.tensor("val_loss").value(5)[0]))
    assert epoch_end_pair(trial, "loss", 4) is None


def test_global_steps_count_as_training(tmp_path: Path) -> None:
    """A trial without modes: GLOBAL steps are TRAIN values numbered by global step."""
    writer = TrialWriter(tmp_path / "g")
    writer.write_collections([])
    for step in (0, 3):
        writer.write_step(step, {"loss": np.float32(step)})
    writer.end_training()
    with create_trial(str(tmp_path / "g")) as trial:
        assert as_training(GLOBAL) is TRAIN
        assert mode_of(trial, 3) == (TRAIN, 3)
        assert value_in_mode(trial, "loss", 3, TRAIN) == 3.0
        assert value_in_mode(trial, "loss", 3, EVAL) is None


def test_real_keras_trial_epoch_end_steps_match_the_hooks_duplicate_entries() -> None:
    """On the real keras_healthy trial, the epoch-end logs are exactly the index files the
    generator found listing `loss` twice."""
    path = hook_trial("keras_healthy")
    labels = json.loads((path / "labels.json").read_text())
    duplicates = [
        d["global_step"]
        for d in labels["written_by_hook"]["index_files_with_duplicate_entries"]
        if "loss" in d["names"]
    ]
    with create_trial(str(path)) as trial:
        ends = [s for s in trial.steps() if is_epoch_end_log(trial, "loss", s)]
        assert ends == duplicates
        means = [e["train_loss_keras_epoch_mean"] for e in labels["evidence"]["per_epoch"]]
        pairs = [epoch_end_pair(trial, "loss", s) for s in ends]
        assert [p[0] for p in pairs] == pytest.approx(means, rel=1e-4)


def test_pass_ended_when_a_later_step_is_not_eval_or_training_ended(tmp_path: Path) -> None:
    """A validation pass is complete when the next saved step is not EVAL, or when no step
    follows and training has ended; not while a later EVAL step or more data may follow."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    layout = [(TRAIN, 0), (EVAL, 0), (EVAL, 1), (TRAIN, 1), (EVAL, 2)]
    for step, (mode, mode_step) in enumerate(layout):
        writer.write_step(step, {"loss": np.float32(1.0)}, mode=mode, mode_step=mode_step)
    with create_trial(str(tmp_path / "t")) as trial:
        assert not pass_ended(trial, 1)  # step 2 is EVAL: the pass goes on
        assert pass_ended(trial, 2)  # step 3 is TRAIN
        assert not pass_ended(trial, 4)  # the last step, training not ended
    writer.end_training()
    with create_trial(str(tmp_path / "t")) as trial:
        assert pass_ended(trial, 4)
