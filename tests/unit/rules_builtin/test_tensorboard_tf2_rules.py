"""Built-in rules with default parameters on TF2-style (Keras, tf.summary) TensorBoard logs:
tensor scalars in train/ and validation/, [k, 3] histograms without sums."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.trial import create_trial
from tests.hook_trials.outcomes import _run
from tests.support.tb_logs import tf2_style

pytest.importorskip("tensorboard")

EPOCHS = 20


def _keras_like(folder: Path, *, val: list[float], grad_scale: float) -> Path:
    rng = np.random.default_rng(3)
    train = [2.0 * np.exp(-e / 5) + 0.05 for e in range(EPOCHS)]
    tf2_style(
        folder / "train",
        scalars={"epoch_loss": list(enumerate(train))},
        histograms={
            "dense/kernel_0/histogram": [(e, rng.normal(0, 0.1, 300)) for e in range(EPOCHS)],
            "gradients/dense/kernel": [(e, rng.normal(0, grad_scale, 300)) for e in range(EPOCHS)],
        },
    )
    tf2_style(folder / "validation", scalars={"epoch_loss": list(enumerate(val))})
    return folder


def _outcome(log: Path, rule: str, tmp_path: Path) -> str:
    with create_trial(str(log), idle_scans_to_complete=1, poll_interval=0.05) as trial:
        return str(_run(rule, trial, tmp_path / rule).cell)


def test_keras_overfit_fires_and_healthy_is_quiet(tmp_path: Path) -> None:
    """Overfit fires when validation/epoch_loss rises above train/epoch_loss, not when it
    follows it."""
    rising = _keras_like(
        tmp_path / "overfit", val=[1.0 + e / 5 for e in range(EPOCHS)], grad_scale=1e-2
    )
    follows = _keras_like(
        tmp_path / "healthy",
        val=[(2.0 * np.exp(-e / 5) + 0.05) * 1.02 for e in range(EPOCHS)],
        grad_scale=1e-2,
    )
    assert _outcome(rising, "Overfit", tmp_path).startswith("fires")
    assert _outcome(follows, "Overfit", tmp_path) == "quiet"
    assert _outcome(follows, "VanishingGradient", tmp_path) == "quiet"


def test_vanishing_gradient_from_tf2_bucket_histograms(tmp_path: Path) -> None:
    """Gradient histograms of magnitude 1e-10 as [k, 3] tensors (no sums: the mean of absolute
    values comes from the buckets) fire VanishingGradient."""
    log = _keras_like(tmp_path / "vanishing", val=[1.0] * EPOCHS, grad_scale=1e-10)
    assert _outcome(log, "VanishingGradient", tmp_path).startswith("fires")
