"""The registry of built-in rules, and what every built-in rule declares about itself."""

from __future__ import annotations

import inspect

import pytest

from rules_builtin import registry

RULES = registry.names()


def test_every_rule_module_registers_one_rule() -> None:
    """The 26 built-in rules are found by name, in any case."""
    assert len(RULES) == 26
    assert all(registry.lookup(name.upper()) is registry.lookup(name) for name in RULES)


@pytest.mark.parametrize("name", RULES)
def test_parameters_match_the_constructor(name: str) -> None:
    """PARAMETERS lists every constructor parameter but base_trial and action_str, in order,
    with the constructor's default (docs/rules.md is generated from PARAMETERS)."""
    cls = registry.lookup(name)
    signature = inspect.signature(cls.__init__).parameters.values()
    expected = [
        (p.name, None if p.default is p.empty else p.default)
        for p in signature
        if p.name not in ("self", "base_trial", "action_str")
    ]
    assert [(p.name, p.default) for p in cls.PARAMETERS] == expected


@pytest.mark.parametrize("name", RULES)
def test_every_rule_records_its_comparisons(name: str) -> None:
    """Every built-in rule counts only comparisons as checks (RECORDS_COMPARISONS)."""
    assert registry.lookup(name).RECORDS_COMPARISONS is True


def test_every_rule_says_what_it_reads_its_windows_and_earliest_firing() -> None:
    """rules_builtin._timing has an entry for every built-in rule (and no other), rendered in
    its docs/rules.md section."""
    from rules_builtin._describe import markdown_section
    from rules_builtin._timing import DETECTION

    assert sorted(DETECTION) == sorted(registry.names())
    for name, (reads, windows, earliest) in DETECTION.items():
        assert reads and windows and earliest, name
        assert "| reads | windows | earliest firing |" in markdown_section(name)
