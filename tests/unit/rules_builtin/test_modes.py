"""rules_builtin._modes: Keras' epoch-end logs, values per mode; and a writer of Keras-like
trials (TRAIN/EVAL interleaved on one global counter) shared by the rules' tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin._modes import (as_training, epoch_end_pair, is_epoch_end_log, mode_of,
                                  value_in_mode)

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
HOOK_TRIALS = Path(__file__).resolve().parents[2] / "fixtures" / "hook_trials"
WEIGHT = "dense/weights/dense/kernel:0"


def hook_trial(name: str) -> Path:
    """The real trial ``tests/fixtures/hook_trials/<name>``; skips the test when absent."""
    path = HOOK_TRIALS / name
    if not (path / "labels.json").exists():
        pytest.skip(f"hook trial {name} not generated")
    return path


def write_keras_like(root: Path, kind: str = "healthy", *, epochs: int = 6,
                     train_batches: int = 12, val_batches: int = 3) -> Path:
    """Write a trial laid out as smdebug's KerasHook writes ``fit(validation_data=...)``.

    One global counter; each epoch has ``train_batches`` TRAIN steps then ``val_batches`` EVAL
    steps. ``loss`` is Keras' running mean of the batch losses, reset every epoch (a sawtooth)
    in both modes; the last EVAL step of an epoch is the epoch-end log: its index file lists
    ``loss`` twice (the validation running mean, then the TRAINING epoch mean, which wins) and
    holds ``val_loss`` (the validation mean). The weight is saved at every step; at EVAL steps
    it equals the last TRAIN step's value. ``kind``: "healthy" (both losses fall, validation
    8 % above the training epoch mean; the batch loss also falls within an epoch), "flat" (learning rate 0: constant losses, constant weights) or
    "overfit" (training falls, validation rises)."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={"loss"}),
                              Collection("weights", tensor_names={WEIGHT})])
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(4, 4)).astype(np.float32)
    step, counters = 0, {TRAIN: 0, EVAL: 0}
    for epoch in range(epochs):
        if kind == "flat":
            train_level, val_level = 1.2, 1.15
        elif kind == "overfit":
            train_level, val_level = 1.0 * 0.8 ** epoch, 1.0 * 1.1 ** epoch
        else:
            train_level, val_level = 1.0 * 0.85 ** epoch, 0.0  # val_level: set below
        batch_losses = []
        for b in range(train_batches):
            noise = 0.0 if kind == "flat" else 0.03 * np.sin(3.0 * b + epoch)
            falling = 1.0 if kind == "flat" else 0.85 ** (b / train_batches)
            batch_losses.append(train_level * falling * (1 + noise))
            if kind != "flat":
                weight = weight + rng.normal(scale=0.01, size=weight.shape).astype(np.float32)
            writer.write_step(step, {"loss": np.float32(np.mean(batch_losses)),
                                     WEIGHT: weight},
                              mode=TRAIN, mode_step=counters[TRAIN])
            step, counters[TRAIN] = step + 1, counters[TRAIN] + 1
        train_mean = float(np.mean(batch_losses))
        if kind == "healthy":
            val_level = train_mean * 1.08
        val_losses = []
        for v in range(val_batches):
            noise = 0.0 if kind == "flat" else 0.02 * np.cos(2.0 * v)
            val_losses.append(val_level * (1 + noise))
            with writer.step_writer(step) as w:
                kw: dict[str, Any] = {"mode": EVAL, "mode_step": counters[EVAL]}
                w.write_tensor(np.float32(np.mean(val_losses)), "loss", **kw)
                w.write_tensor(weight, WEIGHT, **kw)
                if v == val_batches - 1:  # Keras' epoch-end logs
                    w.write_tensor(np.float32(train_mean), "loss", **kw)
                    w.write_tensor(np.float32(np.mean(val_losses)), "val_loss", **kw)
            step, counters[EVAL] = step + 1, counters[EVAL] + 1
    writer.end_training()
    return root


@pytest.fixture
def keras_like(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``keras_like(kind, **layout)``: an open trial from ``write_keras_like``."""
    opened: list[Any] = []

    def make(kind: str = "healthy", **layout: int) -> Any:
        root = write_keras_like(tmp_path / f"{kind}{len(opened)}", kind, **layout)
        trial = create_trial(str(root))
        opened.append(trial)
        return trial

    yield make
    for trial in opened:
        trial.close()


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
        keras_like: Callable[..., Any]) -> None:
    """Only the last EVAL step of each epoch is an epoch-end log of `loss`, never of `val_loss`."""
    trial = keras_like(epochs=2, train_batches=4, val_batches=2)
    ends = [s for s in trial.steps() if is_epoch_end_log(trial, "loss", s)]
    assert ends == [5, 11]
    assert not any(is_epoch_end_log(trial, "val_loss", s) for s in trial.steps())
    assert not is_epoch_end_log(trial, WEIGHT, 5)


def test_value_in_mode_skips_the_epoch_end_log_and_other_modes(
        keras_like: Callable[..., Any]) -> None:
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
    duplicates = [d["global_step"] for d in
                  labels["written_by_hook"]["index_files_with_duplicate_entries"]
                  if "loss" in d["names"]]
    with create_trial(str(path)) as trial:
        ends = [s for s in trial.steps() if is_epoch_end_log(trial, "loss", s)]
        assert ends == duplicates
        means = [e["train_loss_keras_epoch_mean"] for e in labels["evidence"]["per_epoch"]]
        pairs = [epoch_end_pair(trial, "loss", s) for s in ends]
        assert [p[0] for p in pairs] == pytest.approx(means, rel=1e-4)
