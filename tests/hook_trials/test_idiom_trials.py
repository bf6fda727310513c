"""The idioms of issue 23 on trials written by smdebug's real hooks (tools/make_hook_trials:
pytorch_idioms.py, keras_idioms.py): each rule fires on exactly the layers the training script
measured as faulty, at the first saved step, and never on the healthy layer beside them."""

from __future__ import annotations

from typing import Any

import pytest

from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.trial import create_trial
from rules_builtin.dead_relu import DeadRelu
from rules_builtin.loss_not_decreasing import LossNotDecreasing
from rules_builtin.overtraining import Overtraining
from rules_builtin.saturated_activation import SaturatedActivation
from tests.hook_trials.outcomes import ROOT, labels


def _tensor(trial: str, layer: str, side: str) -> str:
    """The tensor the hook wrote for a layer the script measured: PyTorch ``relu[1]`` ->
    ``relu_<side>_1``, Keras ``hot`` -> ``hot/<side>s``."""
    if trial.startswith("keras"):
        return f"{layer}/{side}s"
    module, _, call = layer.partition("[")
    return f"{module}_{side}_{call.rstrip(']') or 0}"


def _faulty(trial: str, key: str) -> tuple[int, set[str], set[str]]:
    """(first saved step, layers the script measured over 50 %, the others) by ``key``."""
    snap = labels(trial)["evidence"]["activations_first_saved_train_step"]
    layers = snap["layers"]
    bad = {n for n, s in layers.items() if (s.get(key) or 0) > 50}
    return snap["global_step"], bad, set(layers) - bad


def _firings(rule: Any, step: int) -> set[str]:
    invoke_rule(rule, raise_eval_cond=False)
    return {t for check in rule.evidence.firings_at(step) for t in check.tensors}


@pytest.mark.parametrize(
    ("trial", "rule", "key", "side"),
    [
        ("pytorch_reused_relu", DeadRelu, "dead_units_pct", "output"),
        ("pytorch_shared_tanh", SaturatedActivation, "saturated_units_pct", "input"),
        ("pytorch_sigmoid_collection", SaturatedActivation, "saturated_units_pct", "input"),
        ("keras_dense_tanh", SaturatedActivation, "saturated_units_pct", "input"),
    ],
)
def test_the_measured_faulty_layers_fire_and_no_other(
    trial: str, rule: type[Any], key: str, side: str
) -> None:
    """A reused ReLU's dead call, a shared tanh's saturated call, a user sigmoid_input
    collection, a saturated Dense(tanh) beside one fed large inputs: the rule fires at the
    first saved step on the faulty layers the script measured and on nothing else."""
    step, bad, good = _faulty(trial, key)
    assert bad, "the trial holds no faulty layer"
    found = _firings(rule(create_trial(str(ROOT / trial))), step)
    assert found == {_tensor(trial, layer, side) for layer in bad}
    assert not found & {_tensor(trial, layer, side) for layer in good}


def test_keras_dense_tanh_saved_inputs_are_not_the_tanh_inputs() -> None:
    """The script measured the healthy Dense(tanh)'s saved inputs outside (-9.5, 9.5) and the
    saturated one's inside: only the pre-activations tell, and they are what is judged."""
    layers = labels("keras_dense_tanh")["evidence"]["activations_first_saved_train_step"]["layers"]
    assert layers["squash"]["saved_inputs_outside_range_pct"] > 50
    assert layers["hot"]["saved_inputs_outside_range_pct"] < 50


@pytest.mark.parametrize(
    "trial", ["pytorch_sigmoid_flat", "keras_sigmoid_flat", "pytorch_nan_start"]
)
def test_a_loss_that_never_falls_fires(trial: str) -> None:
    """A sigmoid network whose loss never falls (and a run whose loss starts NaN, then stays
    flat): LossNotDecreasing fires; its evidence names the values it compared."""
    rule = LossNotDecreasing(create_trial(str(ROOT / trial)))
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps
    assert rule.evidence.summary()["reasons"][0]["parameter"] in (
        "diff_percent",
        "increase_threshold_percent",
    )


def test_a_nan_start_does_not_stop_overtraining() -> None:
    """A loss NaN in its first saved values (skipped optimiser steps), then flat: Overtraining
    checks the run (it never says it checked nothing) and fires on the plateau."""
    rule = Overtraining(create_trial(str(ROOT / "pytorch_nan_start")))
    result = invoke_rule(rule, raise_eval_cond=False)
    assert not checked_nothing(rule, result)
    assert result.fired_steps
    ev = labels("pytorch_nan_start")["evidence"]
    assert ev["train_loss_per_step"][0] == "nan" and ev["first_nonfinite_global_step"] == 0
