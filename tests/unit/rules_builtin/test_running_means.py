"""Keras running-mean losses: where epochs and validation passes start, and the batch means."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from rules_builtin._running_means import RunningMeans

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
LOSSES = [Collection("losses", include_regex=["^loss$"])]


def _batches(epoch: int, k: int) -> float:
    return 2.0 - 0.1 * epoch + 0.3 * np.sin(1.7 * k)


def test_validation_passes_start_after_each_epoch_end_log(
    make_trial: Callable[..., Any],
) -> None:
    """TRAIN losses saved only every 40 TRAIN steps (most epochs none): every EVAL pass still
    starts after the previous epoch-end log, so each EVAL batch mean is that batch's loss."""
    tensors: dict[int, dict[str, Any]] = {}
    modes: dict[int, tuple[ModeKeys, int]] = {}
    g, t, e, truth = 0, 0, 0, {}
    for epoch in range(6):
        for _ in range(12):
            if t % 40 == 0:
                tensors[g], modes[g] = {"loss": np.float32(1.0)}, (TRAIN, t)
            g, t = g + 1, t + 1
        seen = []
        for k in range(3):
            seen.append(_batches(epoch, k))
            truth[e] = seen[-1]
            tensors[g] = {"loss": np.float32(np.mean(seen))}
            if k == 2:  # Keras' epoch-end logs (the training mean wins for loss)
                tensors[g] = {"loss": np.float32(1.0), "val_loss": np.float32(np.mean(seen))}
            modes[g] = (EVAL, e)
            g, e = g + 1, e + 1
    trial = make_trial(tensors, collections=LOSSES, modes=modes)
    means = RunningMeans(trial)
    assert means.applies("loss", EVAL)
    for m in trial.steps(mode=EVAL):
        step = trial.global_step(EVAL, m)
        assert means.position(EVAL, m, step) == m % 3
        if m % 3 == 1:  # (position 2 is the epoch-end log: not an EVAL value)
            found = means.batch_mean("loss", EVAL, m, step)
            assert found == pytest.approx(truth[m], rel=1e-5)


def test_epochs_without_a_saved_batch_log_start_at_the_common_length(
    make_trial: Callable[..., Any],
) -> None:
    """Without validation, Keras' batch log gives the epoch starts; an epoch whose batch log
    was not saved starts where the epochs' common length says."""
    tensors: dict[int, dict[str, Any]] = {}
    modes: dict[int, tuple[ModeKeys, int]] = {}
    seen: list[float] = []
    for g in range(60):  # 5 epochs of 12 batches
        epoch, k = divmod(g, 12)
        seen = [] if k == 0 else seen
        seen.append(_batches(epoch, k))
        tensors[g] = {"loss": np.float32(np.mean(seen))}
        if k == 5 and epoch in (0, 1, 4):  # the batch log saved in 3 epochs only
            tensors[g]["batch"] = np.float32(k)
        modes[g] = (TRAIN, g)
    trial = make_trial(tensors, collections=LOSSES, modes=modes)
    means = RunningMeans(trial)
    assert means.applies("loss", TRAIN)
    for g in range(1, 60):
        assert means.position(TRAIN, g, g) == g % 12
        found = means.batch_mean("loss", TRAIN, g, g)
        assert found == pytest.approx(_batches(*divmod(g, 12)), rel=1e-4)
