"""Trials for the rules' tests: the real-hook fixtures, and a writer of Keras-like trials
(TRAIN and EVAL steps interleaved on one global counter, as smdebug's KerasHook writes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter

__all__ = ["HOOK_TRIALS", "WEIGHT", "hook_trial", "write_keras_like"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
HOOK_TRIALS = Path(__file__).resolve().parents[1] / "fixtures" / "hook_trials"
WEIGHT = "dense/weights/dense/kernel:0"


def hook_trial(name: str) -> Path:
    """The real trial ``tests/fixtures/hook_trials/<name>`` (committed: never skipped)."""
    path = HOOK_TRIALS / name
    assert (path / "labels.json").is_file(), f"no hook trial {name} in {HOOK_TRIALS}"
    return path


# One epoch of batch losses of a Keras run that never learns (hook trial keras_sigmoid_flat):
# the first batches are the highest, so the running mean falls within every epoch.
STUCK_BATCHES = [1.8525, 1.6707, 1.5444, 1.1659, 1.4134, 1.3527, 1.5493, 1.4739, 1.4837, 0.848]
STUCK_BATCHES += [1.2872, 1.605]


def write_keras_like(
    root: Path,
    kind: str = "healthy",
    *,
    epochs: int = 6,
    train_batches: int = 12,
    val_batches: int = 3,
) -> Path:
    """Write a trial laid out as smdebug's KerasHook writes ``fit(validation_data=...)``.

    One global counter; each epoch has ``train_batches`` TRAIN steps then ``val_batches`` EVAL
    steps. ``loss`` is Keras' running mean of the batch losses, reset every epoch (a sawtooth)
    in both modes; the last EVAL step of an epoch is the epoch-end log: its index file lists
    ``loss`` twice (the validation running mean, then the TRAINING epoch mean, which wins) and
    holds ``val_loss`` (the validation mean). The weight is saved at every step; at EVAL steps
    it equals the last TRAIN step's value. ``kind``: "healthy" (both losses fall, validation
    8 % above the training epoch mean; the batch loss also falls within an epoch), "flat" (learning rate 0: constant losses, constant weights), "stuck"
    (no learning on noisy batches: each epoch's batch losses are ``STUCK_BATCHES``) or
    "overfit" (training falls, validation rises)."""
    writer = TrialWriter(root)
    writer.write_collections(
        [Collection("losses", tensor_names={"loss"}), Collection("weights", tensor_names={WEIGHT})]
    )
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(4, 4)).astype(np.float32)
    step, counters = 0, {TRAIN: 0, EVAL: 0}
    for epoch in range(epochs):
        if kind in ("flat", "stuck"):
            train_level, val_level = 1.2, 1.15
        elif kind == "overfit":
            train_level, val_level = 1.0 * 0.8**epoch, 1.0 * 1.1**epoch
        else:
            train_level, val_level = 1.0 * 0.85**epoch, 0.0  # val_level: set below
        batch_losses = []
        for b in range(train_batches):
            noise = 0.0 if kind == "flat" else 0.03 * np.sin(3.0 * b + epoch)
            falling = 1.0 if kind == "flat" else 0.85 ** (b / train_batches)
            if kind == "stuck":  # the same batches' losses every epoch (a real run's)
                noise, falling = STUCK_BATCHES[b % len(STUCK_BATCHES)] / train_level - 1, 1.0
            batch_losses.append(train_level * falling * (1 + noise))
            if kind not in ("flat", "stuck"):
                weight = weight + rng.normal(scale=0.01, size=weight.shape).astype(np.float32)
            writer.write_step(
                step,
                {"loss": np.float32(np.mean(batch_losses)), WEIGHT: weight},
                mode=TRAIN,
                mode_step=counters[TRAIN],
            )
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
