"""Every built-in rule on models trained for real: it fires on its fault, stays quiet when healthy,
and docs/rules.md shows exactly the measured outcomes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.scenarios.outcomes import FAULTS, NOT_APPLICABLE, Outcome, run_all

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Outcome]]:
    return run_all(tmp_path_factory.mktemp("scenarios"))


@pytest.mark.parametrize("rule", sorted(FAULTS))
def test_rule_fires_on_its_fault(outcomes: dict[str, dict[str, Outcome]], rule: str) -> None:
    """Each rule fires on the training run that has the fault it names."""
    assert outcomes[rule][FAULTS[rule]].fired, f"{rule} did not fire on {FAULTS[rule]}"


def test_no_rule_fires_on_the_healthy_run(outcomes: dict[str, dict[str, Outcome]]) -> None:
    """No built-in rule fires on the healthy training run."""
    fired = {rule: o["healthy"].fired for rule, o in outcomes.items() if o["healthy"].fired}
    assert fired == {}


def test_rules_doc_table_is_the_measured_one(outcomes: dict[str, dict[str, Outcome]]) -> None:
    """docs/rules.md's rule x scenario table holds exactly these outcomes."""
    text = DOC.read_text()
    text = text[text.index("## Rules on real training runs") :]
    for rule, by_scenario in outcomes.items():
        if rule in NOT_APPLICABLE:
            continue
        row = re.search(rf"^\| {rule} \|(.*)\|$", text, re.M)
        assert row, f"no row for {rule} in docs/rules.md"
        cells = [c.strip().strip("*") for c in row.group(1).split("|")]
        assert cells == [o.cell for o in by_scenario.values()], rule


def test_rules_doc_sections_are_current() -> None:
    """docs/rules.md holds each rule's section as its code describes it now (docstring and
    parameters); rerun tools/gen_rules_doc.py after changing a rule."""
    import importlib.util

    from rules_builtin import registry

    path = Path(__file__).resolve().parents[2] / "tools" / "gen_rules_doc.py"
    spec = importlib.util.spec_from_file_location("gen_rules_doc", path)
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    text = DOC.read_text()
    stale = [name for name in registry.names() if generator.rule_section(name) not in text]
    assert stale == [], f"stale sections in docs/rules.md: {stale}"
