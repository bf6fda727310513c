"""Every built-in rule with DEFAULT parameters on trials written by smdebug's real Keras,
PyTorch and XGBoost hooks: it fires on the fault the trial was made with, nothing fires on a
healthy trial, and docs/rules.md shows exactly the measured table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hook_trials.outcomes import (
    CHECKED_NOTHING,
    FAULTS,
    KNOWN_MISFIRES,
    TRIALS,
    Outcome,
    run_all,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
HEALTHY = [t for t in TRIALS if t.endswith("_healthy")]
CASES = [(trial, rule) for trial in TRIALS for rule in FAULTS[trial]]


def _known(trial: str, rules: list[str] | None = None) -> list[pytest.MarkDecorator]:
    """xfail(strict) for a rule another change owns that misfires on ``trial``."""
    why = [v for (t, r), v in KNOWN_MISFIRES.items() if t == trial and (not rules or r in rules)]
    return [pytest.mark.xfail(strict=True, reason="; ".join(why))] if why else []


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Outcome]]:
    return run_all(tmp_path_factory.mktemp("hook-trials"))


def test_every_framework_has_trials() -> None:
    """The suite holds Keras, PyTorch and XGBoost trials, healthy ones for each."""
    assert {t.split("_")[0] for t in TRIALS} == {"keras", "pytorch", "xgboost"}
    assert {t.split("_")[0] for t in HEALTHY} == {"keras", "pytorch", "xgboost"}


@pytest.mark.parametrize(
    ("trial", "rule"),
    [pytest.param(t, r, id=f"{r}-{t}", marks=_known(t, [r])) for t, r in CASES],
)
def test_rule_fires_on_its_fault(
    outcomes: dict[str, dict[str, Outcome]], trial: str, rule: str
) -> None:
    """The rule fires, with default parameters, on the real-hook trial made with its fault."""
    assert outcomes[rule][trial].fired, f"{rule} on {trial}: {outcomes[rule][trial].cell}"


@pytest.mark.parametrize("trial", [pytest.param(t, marks=_known(t)) for t in HEALTHY])
def test_nothing_fires_on_a_healthy_trial(
    outcomes: dict[str, dict[str, Outcome]], trial: str
) -> None:
    """On a healthy real-hook trial every rule is quiet or says it checked nothing."""
    fired = {rule: o[trial].cell for rule, o in outcomes.items() if o[trial].fired}
    assert fired == {}


def test_checked_nothing_is_never_quiet(outcomes: dict[str, dict[str, Outcome]]) -> None:
    """XGBoost-only rules on deep-learning trials end 'checked nothing', not quiet."""
    for trial in TRIALS:
        if trial.startswith(("keras", "pytorch")):
            for rule in ("TreeDepth", "FeatureImportanceOverweight"):
                assert outcomes[rule][trial].cell == CHECKED_NOTHING, (rule, trial)


def test_rules_doc_hook_table_is_the_measured_one(outcomes: dict[str, dict[str, Outcome]]) -> None:
    """docs/rules.md's rule x real-hook-trial table holds exactly these outcomes."""
    text = DOC.read_text()
    section = text[text.index("## Rules on trials written by the real framework hooks") :]
    for rule, by_trial in outcomes.items():
        row = re.search(rf"^\| {rule} \|(.*)\|$", section, re.M)
        assert row, f"no row for {rule} in docs/rules.md"
        cells = [c.strip().strip("*") for c in row.group(1).split("|")]
        assert cells == [by_trial[t].cell for t in TRIALS], rule


def test_stability_rules_without_their_series_check_nothing(
    outcomes: dict[str, dict[str, Outcome]],
) -> None:
    """No hook trial logs a learning rate or a throughput: LearningRateSchedule and
    ThroughputDrop end "checked nothing" (Error) on every one, never quiet; XGBoost trials hold
    no gradients for GradientNormSpike; NonFiniteValues checks something on every trial."""
    for trial in TRIALS:
        for rule in ("LearningRateSchedule", "ThroughputDrop"):
            assert outcomes[rule][trial].cell == CHECKED_NOTHING, (rule, trial)
        assert outcomes["NonFiniteValues"][trial].cell != CHECKED_NOTHING, trial
        if trial.startswith("xgboost"):
            assert outcomes["GradientNormSpike"][trial].cell == CHECKED_NOTHING, trial
