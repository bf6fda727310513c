"""Every built-in rule, with DEFAULT parameters, on every trial written by smdebug 1.0.34's real
framework hooks (``tests/fixtures/hook_trials``, made by ``tools/make_hook_trials``).

Used by the tests beside this file (each rule fires on the fault it exists for; nothing fires
on a healthy trial; docs/rules.md shows the measured table) and by tools/gen_rules_doc.py, so
the documented table is always the measured one. A run is judged as the evaluator judges it:
a rule that checked nothing is "checked nothing" (the evaluator's Error, exit 2), never quiet.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from evaluator.errors import ConfigurationError, InsufficientInformationForRuleInvocation
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.scenarios.outcomes import Outcome
from tests.support.builtin_rules import build_default

__all__ = [
    "CONVERGED_MISFIRES",
    "FAULTS",
    "KNOWN_MISFIRES",
    "NEEDS",
    "TRIALS",
    "Outcome",
    "labels",
    "run_all",
]

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "hook_trials"
TRIALS = sorted(p.name for p in ROOT.iterdir() if (p / "labels.json").is_file())

# trial -> the rules that must fire there: the trial's own "expected" list (labels.json,
# written by the training script from what it measured), limited to rules we ship.
FAULTS: dict[str, list[str]] = {}

# Rules that cannot run with defaults alone on any of these trials, and why (shown as is).
NEEDS = {
    "SimilarAcrossRuns": "needs other_trials",
}

CHECKED_NOTHING = "checked nothing"

# (trial, rule) -> why a rule another change owns misfires there (measured figures); the tests
# mark these xfail(strict=True) so that the fix shows.
KNOWN_MISFIRES = {}
# Of those, the firings whose diagnosis says "converged" (what the loss-diagnosis test allows).
CONVERGED_MISFIRES: set[tuple[str, str]] = set()


def labels(trial: str) -> dict[str, Any]:
    return json.loads((ROOT / trial / "labels.json").read_text())


for _trial in TRIALS:
    FAULTS[_trial] = [r for r in labels(_trial).get("expected", []) if registry.lookup(r)]


def run_all(
    workdir: Path | None = None, trials: list[str] | None = None
) -> dict[str, dict[str, Outcome]]:
    """``{rule: {trial: Outcome}}`` for every built-in rule and hook trial (or ``trials``)."""
    out = Path(workdir or tempfile.mkdtemp(prefix="hook-trials-"))
    table: dict[str, dict[str, Outcome]] = {rule: {} for rule in registry.names()}
    for name in TRIALS if trials is None else trials:
        trial = create_trial(str(ROOT / name))
        try:
            for rule in registry.names():
                table[rule][name] = _run(rule, trial, out / rule / name)
        finally:
            trial.close()
    return table


def _run(rule: str, trial: Any, out: Path) -> Outcome:
    if rule in NEEDS:
        return Outcome(note=NEEDS[rule])
    try:
        instance = build_default(rule, trial, out)
    except ConfigurationError as e:
        return Outcome(note="needs parameters" if "needs" in str(e) else f"error: {e}")
    try:
        result = invoke_rule(instance, raise_eval_cond=False)
    except InsufficientInformationForRuleInvocation:  # the rule says it cannot judge this run
        return Outcome(note=CHECKED_NOTHING)
    if checked_nothing(instance, result):
        return Outcome(note=CHECKED_NOTHING)
    return Outcome(list(result.fired_steps))
