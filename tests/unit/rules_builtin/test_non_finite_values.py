"""NonFiniteValues: NaN and inf in logged scalars and saved tensors, and the NaN loss the Hugging
Face Trainer logs as 0.0."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from evaluator.rules.loader import build_rule
from rules_builtin import registry
from tests.unit.rules_builtin.stability_logs import log, run


def test_masked_nan_loss_fires_at_its_first_step(tmp_path: Path) -> None:
    """loss 0.0 beside grad_norm NaN fires at the first such step, diagnosed diverging, with
    the masked reading among the firings."""
    loss = [1.0 - 0.01 * i for i in range(30)]
    grad = [0.5] * 30
    for i in range(20, 30):
        loss[i], grad[i] = 0.0, math.nan
    result = run(log(tmp_path, {"train/loss": loss, "train/grad_norm": grad}), "NonFiniteValues")
    assert result.fired[0] == 210
    quantities = {c.quantity for c in result.checks if c.step == result.checks[0].step}
    assert "losses of 0.0 beside a non-finite gradient norm or loss" in quantities
    assert all(c.diagnosis is not None and c.diagnosis.kind == "diverging" for c in result.checks)


def test_masked_nan_is_found_when_only_losses_are_selected(tmp_path: Path) -> None:
    """With collection_names=losses (an fp16 user's choice) the NaN grad_norm no longer fires
    by itself, but the 0.0 loss beside it does."""
    series = {"train/loss": [1.0, 0.9, 0.0, 0.0], "train/grad_norm": [1.0, 1.0, math.nan, 2.0]}
    result = run(log(tmp_path, series), "NonFiniteValues", collection_names="losses")
    assert result.fired == [30]
    assert [c.tensors for c in result.checks] == [("loss",)]
    off = run(
        log(tmp_path, series), "NonFiniteValues", collection_names="losses", masked_nan="false"
    )
    assert off.fired == [] and not off.nothing


def test_a_true_zero_loss_is_not_masked(tmp_path: Path) -> None:
    """A loss of 0.0 beside a finite grad_norm (a fitted classifier) is no NaN."""
    series = {"train/loss": [0.5, 0.1, 0.0, 0.0], "train/grad_norm": [1.0, 0.5, 0.0, 0.0]}
    assert run(log(tmp_path, series), "NonFiniteValues").fired == []


def test_inf_eval_loss_and_nan_learning_rate(tmp_path: Path) -> None:
    """An infinite eval/loss fires at its step; a NaN learning rate (no collection holds
    it) is found by name."""
    series = {"train/loss": [1.0] * 6, "eval/loss": [1.0, 1.0, math.inf, 1.0, 1.0, 1.0]}
    assert run(log(tmp_path / "eval", series), "NonFiniteValues").fired == [30]
    lr = {"train/loss": [1.0] * 6, "train/learning_rate": [1e-4] * 4 + [math.nan] * 2}
    result = run(log(tmp_path / "lr", lr), "NonFiniteValues")
    assert result.fired[0] == 50
    assert result.checks[0].tensors == ("learning_rate",)


def test_gradient_tensor_with_inf(make_trial: Callable[..., Any]) -> None:
    """On an smdebug trial a gradient tensor holding an inf fires at its step, counting its
    non-finite elements."""
    grad = np.ones(6, dtype=np.float32)
    bad = grad.copy()
    bad[[1, 4]] = np.inf
    steps = {s: {"gradients/w": bad if s == 3 else grad, "loss": np.float32(1.0)} for s in range(5)}
    collections = [
        Collection("gradients", include_regex=["^gradients/"]),
        Collection("losses", tensor_names={"loss"}),
    ]
    trial = make_trial(steps, collections=collections)
    rule = build_rule(registry.lookup("NonFiniteValues"), trial, {})
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps == (3,)
    (check,) = rule.evidence.firings_at(3)
    assert (check.tensors, check.value, check.threshold) == (("gradients/w",), 2.0, 0.0)


def test_finite_run_is_quiet_and_checked(tmp_path: Path) -> None:
    """A finite log is quiet, with every value compared."""
    series = {"train/loss": [1.0, 0.8, 0.6], "train/grad_norm": [2.0, 1.0, 1.5]}
    result = run(log(tmp_path, series), "NonFiniteValues")
    assert result.fired == [] and not result.nothing
