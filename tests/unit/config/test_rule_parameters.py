"""load_config: per-rule parameters (``--<Rule>.<key>``, rule lists) and which processing-config
keys are rule parameters at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluator.config import RESERVED_KEYS, EvaluatorConfig, load_config
from evaluator.errors import ConfigurationError

TWO = {"rule_to_invoke": "VanishingGradient,ExplodingTensor", "base_trial": "trial"}


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trial").mkdir()


def load(
    argv: list[str], env: dict[str, str] | None = None, *, processing: dict[str, Any] | None = None
) -> EvaluatorConfig:
    root = Path("opt_ml")
    if processing is not None:
        path = root / "config" / "processingjobconfig.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(processing))
    return load_config(argv, TWO if env is None else env, opt_ml_root=root, stdout_is_tty=False)


def by_name(config: EvaluatorConfig) -> dict[str, Any]:
    return {r.configuration_name: r for r in config.rules}


@pytest.mark.parametrize(
    "argv",
    [
        ["--VanishingGradient.threshold", "1e-12"],
        ["--VanishingGradient.threshold=1e-12"],
        ["--vanishinggradient.threshold", "1e-12"],
    ],
)
def test_rule_flag_applies_to_its_rule_only(argv: list[str]) -> None:
    """--<Rule>.<key> (both flag forms, rule name in any case) reaches only that rule."""
    rules = by_name(load(argv))
    assert rules["VanishingGradient"].parameters == {"threshold": "1e-12"}
    assert rules["VanishingGradient"].rule_only == ["threshold"]
    assert rules["ExplodingTensor"].parameters == {}


def test_rule_flag_beats_the_plain_flag() -> None:
    """--VanishingGradient.threshold wins over --threshold for that rule, whatever the order."""
    rules = by_name(load(["--VanishingGradient.threshold", "1", "--threshold", "2"]))
    assert rules["VanishingGradient"].parameters == {"threshold": "1"}
    assert rules["ExplodingTensor"].parameters == {"threshold": "2"}
    assert rules["ExplodingTensor"].rule_only == []


def test_rule_flag_by_configuration_name(tmp_path: Path) -> None:
    """The prefix may be a RuleConfigurationName from a rule list."""
    path = tmp_path / "rules.json"
    path.write_text(
        json.dumps(
            [
                {
                    "RuleConfigurationName": "vg-strict",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                },
                {
                    "RuleConfigurationName": "vg-loose",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                },
            ]
        )
    )
    rules = by_name(
        load(["--config", str(path), "--vg-loose.threshold", "1"], env={"base_trial": "trial"})
    )
    assert rules["vg-loose"].parameters == {"threshold": "1"}
    assert rules["vg-strict"].parameters == {}


def test_rule_list_entry_parameters_are_that_rules_own(tmp_path: Path) -> None:
    """A rule list entry's RuleParameters are its rule's alone (checked strictly later);
    flags and environment stay shared."""
    path = tmp_path / "rules.json"
    path.write_text(
        json.dumps(
            [
                {"rule_to_invoke": "VanishingGradient", "threshold": "1"},
                {"rule_to_invoke": "ExplodingTensor", "only_nan": "true"},
            ]
        )
    )
    rules = by_name(load(["--config", str(path), "--shared", "s"], env={"base_trial": "trial"}))
    assert rules["VanishingGradient"].rule_only == ["threshold"]
    assert rules["ExplodingTensor"].rule_only == ["only_nan"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--Overfit.patience", "2"],
            "Overfit.patience names no rule of this run (rules: "
            "VanishingGradient, ExplodingTensor)",
        ),
        (["--VanishingGradient.start_step", "2"], "start_step is not a rule parameter"),
        (["--a.b.c", "2"], "'a.b.c' is not a parameter name"),
    ],
)
def test_bad_rule_flags(argv: list[str], expected: str) -> None:
    """A per-rule flag naming no rule of the run, an evaluator key or no valid key is refused."""
    with pytest.raises(ConfigurationError) as info:
        load(argv)
    assert expected in str(info.value)


def test_upper_case_processing_keys_are_not_parameters() -> None:
    """SageMaker's own ALL-CAPS variables in the processing Environment are not parameters;
    upper-case aliases of evaluator keys still count, lower and mixed case are parameters."""
    config = load(
        [],
        env={},
        processing={
            "Environment": {
                "RULE_TO_INVOKE": "VanishingGradient",
                "BASE_TRIAL": "trial",
                "AWS_REGION": "eu-west-1",
                "SAGEMAKER_PROGRAM": "x",
                "threshold": "1",
                "myKnob": "2",
            }
        },
    )
    assert config.rules[0].name == "VanishingGradient"
    assert config.rules[0].parameters == {"threshold": "1", "myKnob": "2"}


def test_upper_case_processing_keys_in_the_process_environment_are_not_parameters() -> None:
    """An ALL-CAPS key listed in the processing Environment and set in the process environment
    (as on SageMaker) is not a rule parameter either."""
    config = load(
        [],
        env={"AWS_REGION": "eu-west-1"},
        processing={
            "Environment": {
                "rule_to_invoke": "VanishingGradient",
                "base_trial": "trial",
                "AWS_REGION": "x",
            }
        },
    )
    assert config.rules[0].parameters == {}


def test_action_str_is_reserved() -> None:
    """action_str is the evaluator's (from action_json), in the one set of reserved keys."""
    assert "action_str" in RESERVED_KEYS and "start_step" in RESERVED_KEYS
    config = load([], env={**TWO, "action_str": "x"})
    assert all(r.environment_parameters == {} for r in config.rules)
