"""Labelled TensorBoard runs written by tensorboardX (torch-style protos), and every built-in
rule's outcome on them with DEFAULT parameters (docs/rules.md's TensorBoard table).

Each run logs the loss every step and, every 5 steps, histograms of ``fc1.weight`` and its
gradient ``fc1.weight.grad``; one fault each. torch's ``add_histogram`` refuses NaN and inf,
so the exploding run shows its fault in the loss and in Lightning-style gradient-norm scalars.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tests.support.tb_logs import torch_style

__all__ = ["FAULTS", "RUNS", "N", "run_all", "write_run"]

N = 60

#: run -> the rule meant to catch its fault (None: healthy), and what was done.
RUNS: dict[str, tuple[str | None, str]] = {
    "healthy": (None, "loss falls, validation loss 2% above it, gradients ~1e-2"),
    "vanishing": ("VanishingGradient", "gradients ~1e-10"),
    "exploding": ("ExplodingTensor", "loss and gradient norms turn NaN/inf at step 30"),
    "flat_loss": ("LossNotDecreasing", "loss stays at 1.0"),
    "overfit": ("Overfit", "validation loss rises while the training loss falls"),
}
FAULTS = {name: rule for name, (rule, _) in RUNS.items() if rule is not None}


def _decreasing() -> list[float]:
    return [float(2.0 * np.exp(-s / 15) + 0.01) for s in range(N)]


def write_run(name: str, folder: Path) -> Path:
    """Write the labelled run ``name`` into ``folder``."""
    rng = np.random.default_rng(1)
    loss = _decreasing()
    grad_scale = 1e-10 if name == "vanishing" else 1e-2
    scalars: dict[str, list[tuple[int, float]]] = {"loss": list(enumerate(loss))}
    val = None
    if name == "healthy":
        val = [x * 1.02 for x in loss]
    elif name == "overfit":
        val = [1.0 + s / 10 for s in range(N)]
    elif name == "flat_loss":
        scalars["loss"] = [(s, 1.0 + 1e-5 * (s % 3)) for s in range(N)]
    elif name == "exploding":
        scalars["loss"] = [(s, loss[s] if s < 30 else float("nan")) for s in range(N)]
        norms = [(s, 1.0 + s / 100 if s < 30 else float("inf")) for s in range(N)]
        scalars["grad_2.0_norm/fc1.weight"] = norms
    hist_steps = range(0, 30 if name == "exploding" else N, 5)
    histograms = {
        "fc1.weight": [(s, rng.normal(0, 0.1, 200)) for s in hist_steps],
        "fc1.weight.grad": [(s, rng.normal(0, grad_scale, 200)) for s in hist_steps],
    }
    torch_style(folder, scalars=scalars, histograms=histograms)
    if val is not None:
        torch_style(folder / "val", scalars={"loss": [(s, val[s]) for s in range(0, N, 5)]})
    return folder


def run_all(workdir: Path | None = None) -> dict[str, dict[str, object]]:
    """``{rule: {run: Outcome}}`` for every built-in rule and labelled run."""
    from evaluator.trial import create_trial
    from rules_builtin import registry
    from tests.hook_trials.outcomes import _run

    root = Path(workdir or tempfile.mkdtemp(prefix="tb-runs-"))
    table: dict[str, dict[str, object]] = {rule: {} for rule in registry.names()}
    for name in RUNS:
        log = write_run(name, root / "logs" / name)
        trial = create_trial(str(log), idle_scans_to_complete=1, poll_interval=0.05)
        try:
            for rule in registry.names():
                table[rule][name] = _run(rule, trial, root / "out" / rule / name)
        finally:
            trial.close()
    return table
