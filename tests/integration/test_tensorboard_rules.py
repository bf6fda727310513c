"""Built-in rules with default parameters on labelled TensorBoard runs written by tensorboardX,
through the command as a user runs it: the right verdict for each run, evidence and report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.evaluator_cli import EvaluatorCli
from tests.support.tb_logs import torch_style

pytest.importorskip("tensorboardX")

N = 60
RULES = ("LossNotDecreasing", "VanishingGradient", "ExplodingTensor", "Overfit")


def _run(
    folder: Path,
    loss: list[float],
    *,
    grad_scale: float = 1e-2,
    val: list[float] | None = None,
    grad_norms: list[float] | None = None,
) -> Path:
    """A torch-style run: the loss every step, weight and gradient histograms every 5 steps
    (none where a value is not finite: torch's add_histogram refuses them), optionally a
    validation loss in val/ every 5 steps and per-parameter gradient-norm scalars."""
    rng = np.random.default_rng(1)
    scalars = {"loss": list(enumerate(loss))}
    if grad_norms is not None:
        scalars["grad_2.0_norm/fc1.weight"] = list(enumerate(grad_norms))
    histograms = {
        "fc1.weight": [(s, rng.normal(0, 0.1, 200)) for s in range(0, N, 5)],
        "fc1.weight.grad": [(s, rng.normal(0, grad_scale, 200)) for s in range(0, N, 5)],
    }
    torch_style(folder, scalars=scalars, histograms=histograms)
    if val is not None:
        torch_style(folder / "val", scalars={"loss": [(s, val[s]) for s in range(0, N, 5)]})
    return folder


def _decreasing() -> list[float]:
    return [float(2.0 * np.exp(-s / 15) + 0.01) for s in range(N)]


def _statuses(tmp_path: Path, log: Path, *rules: str) -> dict[str, str]:
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli("--trial-dir", str(log), "--rule", ",".join(rules), "--poll_interval", "0.2")
    result = run.result
    assert result is not None, run.describe()
    started = run.event("evaluation_started")
    assert started["event"] == "evaluation_started" and started["trial_kind"] == "tensorboard"
    assert "idle scans" in started["waits_for"]
    assert (run.output_dir / "rule_report.html").exists()
    return {r["rule"]: r["status"] for r in result["rules"]}


def test_healthy_run_raises_nothing(tmp_path: Path) -> None:
    """A decreasing loss, a validation loss just above it and ordinary gradients: no issue."""
    loss = _decreasing()
    log = _run(tmp_path / "healthy", loss, val=[x * 1.02 for x in loss])
    assert _statuses(tmp_path, log, *RULES) == dict.fromkeys(RULES, "NoIssuesFound")


def test_vanishing_gradients_are_found(tmp_path: Path) -> None:
    """Gradient histograms of magnitude 1e-10 fire VanishingGradient, and only it."""
    log = _run(tmp_path / "vanishing", _decreasing(), grad_scale=1e-10)
    statuses = _statuses(tmp_path, log, "LossNotDecreasing", "VanishingGradient")
    assert statuses == {"LossNotDecreasing": "NoIssuesFound", "VanishingGradient": "IssuesFound"}


def test_exploding_run_is_found_from_scalars(tmp_path: Path) -> None:
    """A loss turning NaN and gradient norms turning inf (torch then writes no histogram)
    fire ExplodingTensor."""
    loss = _decreasing()[:30] + [float("nan")] * (N - 30)
    norms = [1.0] * 30 + [float("inf")] * (N - 30)
    log = _run(tmp_path / "exploding", loss, grad_norms=norms)
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli("--trial-dir", str(log), "--rule", "ExplodingTensor", "--poll_interval", "0.2")
    assert run.returncode == 1, run.describe()
    assert run.result is not None and run.result["step"] == 30


def test_flat_loss_is_found(tmp_path: Path) -> None:
    """A loss that does not move fires LossNotDecreasing, with its evidence."""
    log = _run(tmp_path / "flat", [1.0 + 1e-5 * (s % 3) for s in range(N)])
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli("--trial-dir", str(log), "--rule", "LossNotDecreasing", "--poll_interval", "0.2")
    assert run.returncode == 1, run.describe()
    reasons = run.result["evidence"]["reasons"] if run.result else []
    assert reasons and reasons[0]["tensors"] == ["loss"]


def test_overfit_is_found(tmp_path: Path) -> None:
    """A validation loss rising while the training loss falls fires Overfit."""
    loss = _decreasing()
    log = _run(tmp_path / "overfit", loss, val=[1.0 + s / 10 for s in range(N)])
    assert _statuses(tmp_path, log, "Overfit") == {"Overfit": "IssuesFound"}


def test_rule_needing_what_was_not_logged_says_what_to_log(tmp_path: Path) -> None:
    """DeadRelu on a log without activations, and Overfit without a validation folder, end in
    "Insufficient information" naming what is missing and the line of logging code to add."""
    log = _run(tmp_path / "run", _decreasing())
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli("--trial-dir", str(log), "--rule", "DeadRelu,Overfit", "--poll_interval", "0.2")
    assert run.returncode == 2, run.describe()
    result = run.result or {}
    by_rule = {r["rule"]: r for r in result["rules"]}
    dead = json.dumps(by_rule["DeadRelu"])
    assert "Insufficient information" in dead and "add_histogram(" in dead
    assert "activations" in dead
    overfit = json.dumps(by_rule["Overfit"])
    assert "validation folder" in overfit and "val_loss" in overfit
