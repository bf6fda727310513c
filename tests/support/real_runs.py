"""Real training runs that strangers published (``shared/data/wild-hf-dev``: Hugging Face
Trainer states replayed through Hugging Face's own ``TensorBoardCallback``), judged by every
built-in rule with default parameters, as the evaluator judges them.

Used by ``tests/integration/test_wild_runs.py`` (the false-alarm and detection targets) and
``bench/false_alarms.py`` (``bench/FALSE_ALARMS.md``). The runs are read where they are, in
the ``shared/`` folder beside the checkout; they are never copied into the repository.

A run's labels (``labels.json`` there) were measured from the log alone, without any rule:
``healthy``, ``overfit``, ``diverged``, ``not-learning`` or ``unclear``, with the step where a
fault starts (``fault_onset_step``, a Trainer step). A firing is given here in the run's own
steps (the event step TensorBoard shows), with its diagnosis (``evaluator.rules.diagnosis``).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import ConfigurationError, InsufficientInformationForRuleInvocation
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.rules.diagnosis import CONVERGED, DIVERGING, NOT_LEARNING, OVERFITTING
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.support.builtin_rules import build_default

__all__ = [
    "MATCHING",
    "WILD",
    "Firing",
    "Verdict",
    "judge_log",
    "wild_labels",
]

WILD = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "wild-hf-dev"

# A fault label -> the diagnosis a firing must carry to have caught it.
MATCHING = {"overfit": OVERFITTING, "diverged": DIVERGING, "not-learning": NOT_LEARNING}

INSUFFICIENT = "insufficient information"
CHECKED_NOTHING = "checked nothing"


@dataclass(frozen=True)
class Firing:
    step: int  # the run's own step (TensorBoard's event step; a global step on smdebug trials)
    diagnosis: str | None  # None: the rule gives none (not a loss-progress rule)


@dataclass(frozen=True)
class Verdict:
    """One rule on one run: its first firing, or why it gave none (``note``)."""

    firing: Firing | None = None
    note: str | None = None  # "insufficient information: ...", "checked nothing", "needs ..."

    @property
    def cell(self) -> str:
        if self.firing is not None:
            kind = f" ({self.firing.diagnosis})" if self.firing.diagnosis else ""
            return f"fires at {self.firing.step}{kind}"
        return self.note or "quiet"

    def converged_or_quiet(self) -> bool:
        return self.firing is None or self.firing.diagnosis == CONVERGED


def wild_labels() -> list[dict[str, Any]]:
    """The wild runs' labels (``labels.json``), in id order; empty when the data is absent."""
    path = WILD / "labels.json"
    if not path.is_file():
        return []
    return sorted(json.loads(path.read_text()), key=lambda lab: lab["id"])


def judge_log(
    path: Path | str, rules: list[str] | None = None, **options: Any
) -> dict[str, Verdict]:
    """``{rule: Verdict}`` for every built-in rule (or ``rules``) on the finished trial or
    TensorBoard log at ``path`` (or MLflow run, ``runs:/<id>`` with its ``mlflow_tracking_uri``
    among ``options``), with default parameters."""
    quiet = logging.getLogger("evaluator")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="real-runs-") as out,
            create_trial(
                str(path), idle_scans_to_complete=1, poll_interval=0.05, **options
            ) as trial,
        ):
            return {
                rule: _judge(rule, trial, Path(out) / rule)
                for rule in (rules if rules is not None else registry.names())
            }
    finally:
        quiet.setLevel(level)


def _judge(rule: str, trial: Any, out: Path) -> Verdict:
    try:
        instance = build_default(rule, trial, out)
    except ConfigurationError as e:
        return Verdict(note="needs parameters" if "needs" in str(e) else f"error: {e}")
    try:
        result = invoke_rule(instance, raise_eval_cond=False)
    except InsufficientInformationForRuleInvocation:  # the rule says it cannot judge this run
        return Verdict(note=CHECKED_NOTHING)
    if checked_nothing(instance, result):
        # Too few logged values for the rule's windows (the rule says how many), or nothing.
        explain = getattr(instance, "why_nothing_checked", None)
        too_few = callable(explain) and explain() is not None
        return Verdict(note=INSUFFICIENT if too_few else CHECKED_NOTHING)
    if not result.fired_steps:
        return Verdict()
    step = result.fired_steps[0]
    reasons = instance.evidence.summary()["reasons"]
    # a reason's "step" is the writer's; "global_step" the trial's where they differ
    firsts = [r for r in reasons if r.get("global_step", r.get("step")) == step] or reasons
    diagnosis = firsts[0].get("diagnosis") if firsts else None
    _, mode_step = trial.mode_modestep(step)
    shown = mode_step if getattr(trial, "kind", None) in ("tensorboard", "mlflow") else step
    return Verdict(Firing(shown if shown is not None else step, diagnosis))
