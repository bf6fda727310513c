"""Trials for the report tests: a long run whose gradients fade layer by layer, the deepest one
below VanishingGradient's default threshold (1e-7) from ``VANISHES_AT`` on; a TensorBoard run
whose loss never falls."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter

__all__ = [
    "LAYERS",
    "VANISHES_AT",
    "VANISHING_TENSOR",
    "write_fading_gradients",
    "write_flat_loss_run",
]

LAYERS = 6
VANISHES_AT = 1500  # the first step where layer 0's mean |gradient| is below 1e-7
VANISHING_TENSOR = "gradients/dense_0/kernelGrad"


def mean_abs(layer: int, step: int, vanishes_at: int = VANISHES_AT) -> float:
    """Layer 0 falls from 1e-3 to 1.5e-7 (times 1 +- 0.1) by step ``vanishes_at - 1``, then
    to 5e-8; deeper layers fall more slowly and never reach the threshold."""
    if layer == 0 and step >= vanishes_at:
        return 5e-8
    wobble = 1 + 0.1 * np.sin(step / 37 + layer)
    return float(1e-3 * 1.5e-4 ** (step / (vanishes_at - 1) / (1 + layer)) * wobble)


def write_fading_gradients(
    root: Path, *, steps: int = 2000, vanishes_at: int = VANISHES_AT
) -> Path:
    """A trial of ``steps`` TRAIN steps of LAYERS gradients (4 elements each), ended."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("gradients", include_regex=["^gradients/"])])
    for step in range(steps):
        tensors = {
            f"gradients/dense_{k}/kernelGrad": np.full(
                4, mean_abs(k, step, vanishes_at), dtype=np.float32
            )
            * np.array([1, -1, 1, -1], dtype=np.float32)
            for k in range(LAYERS)
        }
        writer.write_step(step, tensors, mode=ModeKeys.TRAIN, mode_step=step)
    writer.end_training()
    return root


def write_flat_loss_run(
    root: Path, *, steps: int = 200, eval_every: int = 10, validation: bool = True
) -> Path:
    """A loss that never falls (2.30 plus noise), logged by tensorboardX at every step as
    ``train/loss`` and every ``eval_every`` steps as ``val/loss``: the run folder."""
    from tests.support.tb_logs import torch_style

    rng = random.Random(7)
    scalars = {"train/loss": [(s, 2.30 + 0.002 * rng.random()) for s in range(steps)]}
    if validation:
        scalars["val/loss"] = [
            (s, 2.31 + 0.002 * rng.random()) for s in range(0, steps, eval_every)
        ]
    return torch_style(root / "run", scalars)
