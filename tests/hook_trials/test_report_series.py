"""Each built-in rule that fires on a real-hook trial writes a report whose recorded series
holds the firing value at the firing step (the rules not covered here, which need parameters,
images, tokens, other trials or a live job, are in tests/report/test_rule_series.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.report import DATA_FILE_NAME, REPORT_FILE_NAME
from rules_builtin import registry
from tests.report.firing import assert_report_holds_the_firing
from tests.report.harness import HOOK_TRIALS, evaluate_with_report

# rule -> a real-hook trial where it fires with its defaults (docs/rules.md's table)
FIRES_ON = {
    "ClassImbalance": "xgboost_imbalanced",
    "Confusion": "xgboost_deep_trees",
    "DeadRelu": "keras_dead_relu",
    "ExplodingTensor": "keras_exploding",
    "FeatureImportanceOverweight": "xgboost_imbalanced",
    "GradientNormSpike": "keras_exploding",
    "LossNotDecreasing": "keras_flat_loss",
    "LossSpike": "keras_exploding",
    "NonFiniteValues": "keras_exploding",
    "Overfit": "keras_overfit",
    "Overtraining": "xgboost_overfit",
    "PoorWeightInitialization": "keras_poor_init",
    "SaturatedActivation": "keras_saturated",
    "TreeDepth": "xgboost_deep_trees",
    "UnchangedTensor": "keras_flat_loss",
    "VanishingGradient": "keras_vanishing_gradients",
    "WeightUpdateRatio": "pytorch_flat_loss",
}


def test_the_table_names_built_in_rules() -> None:
    """Every rule named here is a registered built-in rule."""
    assert all(registry.lookup(rule) for rule in FIRES_ON)


@pytest.mark.parametrize("rule", sorted(FIRES_ON))
def test_report_series_holds_the_firing(rule: str, tmp_path: Path) -> None:
    """The rule fires on its trial and its report's series holds the firing value and step."""
    trial = HOOK_TRIALS / FIRES_ON[rule]
    run = evaluate_with_report(["--trial-dir", str(trial), "--rule", rule], tmp_path / "out")
    assert run.exit_code == 1
    assert_report_holds_the_firing(run.output_dir, rule)


# rule -> (trial, the curve it records behind its verdict, the modes it is kept in, the
# steps it spans at least: ClassImbalance fires at its first step, drawn as bars)
CURVES = {
    "Overfit": ("keras_overfit", "loss", {"TRAIN", "EVAL"}, 5),
    "LossNotDecreasing": ("keras_flat_loss", "loss", {"TRAIN"}, 5),
    "Overtraining": ("xgboost_overfit", "loss", {"TRAIN"}, 5),
    "ExplodingTensor": ("keras_exploding", "L2 norm", {None}, 5),
    "ClassImbalance": ("xgboost_imbalanced", "labels seen per class", {None}, 1),
    "Confusion": ("xgboost_deep_trees", "confusion matrix (true → predicted)", {None}, 1),
}


@pytest.mark.parametrize("rule", sorted(CURVES))
def test_report_charts_the_curve_behind_the_verdict(rule: str, tmp_path: Path) -> None:
    """Besides the quantity it tests, the rule records the curve an engineer checks (the loss
    per mode, a tensor's norm) over several steps, and the report draws it first."""
    trial, quantity, modes, steps = CURVES[rule]
    run = evaluate_with_report(
        ["--trial-dir", str(HOOK_TRIALS / trial), "--rule", rule], tmp_path / "out"
    )
    assert run.exit_code == 1
    data = json.loads((run.output_dir / DATA_FILE_NAME).read_text())
    curves = [s for s in data["rules"][rule]["series"] if s["parameter"] is None]
    assert {s["quantity"] for s in curves} == {quantity}
    assert {s["mode"] for s in curves} == modes
    assert max(len(s["points"]) for s in curves) >= steps
    html = (run.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    assert html.index("The curves behind the verdict") < html.index("What the rule tested")
    if rule == "Confusion":  # its matrix, as a table: true classes in rows
        assert '<table class="matrix">' in html and "<th>1</th>" in html
