"""Run every built-in rule over every training scenario: the rule x scenario outcome table.

Used by the scenario tests (which check that each rule fires on its fault and stays quiet on
the healthy run) and by tools/gen_rules_doc.py (which prints the table into docs/rules.md), so
the documented table is always the measured one.
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path
from typing import Any

from evaluator.rules import invoke_rule
from evaluator.rules.loader import build_rule
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.scenarios.training import SCENARIOS, train

__all__ = ["FAULTS", "NOT_APPLICABLE", "Outcome", "run_all"]

# rule -> the scenario whose fault it names (it must fire there)
FAULTS = {
    "VanishingGradient": "vanishing_gradients",
    "ExplodingTensor": "exploding",
    "DeadRelu": "dead_relu",
    "SaturatedActivation": "saturated_tanh",
    "LossNotDecreasing": "lr_zero",
    "UnchangedTensor": "lr_zero",
    "WeightUpdateRatio": "lr_zero",
    "Overfit": "overfit",
    "Overtraining": "overfit",
    "ClassImbalance": "imbalanced",
    "AllZero": "dead_relu",
}

# rules that cannot apply to these MLP trials, and why (shown in the table)
NOT_APPLICABLE = {
    "SimilarAcrossRuns": "needs other_trials",
    "CheckInputImages": "needs image inputs",
    "NLPSequenceRatio": "needs token sequences",
    "StalledTrainingRule": "needs a live job",
    "FeatureImportanceOverweight": "XGBoost only",
    "TreeDepth": "XGBoost only",
    "CreateXgboostReport": "report writer",
}

# parameters the table runs a rule with, where its defaults select nothing in these trials
PARAMETERS: dict[str, dict[str, str]] = {
    "TensorVariance": {
        "collection_names": "gradients",
        "min_threshold": "1e-12",
        "max_threshold": "1e6",
    },
    "AllZero": {"tensor_regex": ".*relu_output"},
    # These runs save every step; SageMaker's default hook saves every 500, where a patience of
    # 5 saved values spans 2500 steps. 20 saved values here is still far shorter.
    "Overtraining": {"patience_train": "20", "patience_validation": "20"},
}


class Outcome:
    """How one rule ended on one scenario."""

    def __init__(self, fired: list[int] | None = None, note: str | None = None) -> None:
        self.fired = fired or []
        self.note = note

    @property
    def cell(self) -> str:
        if self.note:
            return self.note
        return f"fires at step {self.fired[0]}" if self.fired else "quiet"


def run_all(workdir: Path | None = None) -> dict[str, dict[str, Outcome]]:
    """``{rule: {scenario: Outcome}}`` for every built-in rule and scenario."""
    root = Path(workdir or tempfile.mkdtemp(prefix="scenarios-"))
    trials = {name: create_trial(str(train(s, root / name))) for name, s in SCENARIOS.items()}
    table: dict[str, dict[str, Outcome]] = {}
    for rule in registry.names():
        table[rule] = {}
        for name, trial in trials.items():
            table[rule][name] = _run(rule, trial, root / "out" / rule)
    for trial in trials.values():
        trial.close()
    return table


def _run(rule: str, trial: Any, out: Path) -> Outcome:
    if rule in NOT_APPLICABLE:
        return Outcome(note="n/a")
    cls = registry.lookup(rule)
    params = dict(PARAMETERS.get(rule, {}))
    if "output_dir" in inspect.signature(cls.__init__).parameters:
        params["output_dir"] = str(out)
    instance = build_rule(cls, trial, params)
    result = invoke_rule(instance, raise_eval_cond=False)
    return Outcome(list(result.fired_steps))
