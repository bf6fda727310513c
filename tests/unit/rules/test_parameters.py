"""Which rule takes which parameter (evaluator.rules.parameters) and the loader's strict binding."""

from __future__ import annotations

from typing import Any

import pytest

from evaluator.config import RuleSpec
from evaluator.errors import ConfigurationError
from evaluator.rules import Rule
from evaluator.rules.loader import build_rule
from evaluator.rules.parameters import effective_parameters, route_parameters
from rules_builtin import registry

VG = registry.lookup("VanishingGradient")
ET = registry.lookup("ExplodingTensor")


class TakesAnything(Rule):
    def __init__(
        self, base_trial: Any, window: str = "3", action_str: str | None = None, **options: str
    ) -> None:
        super().__init__(base_trial, action_str)
        self.options = options

    def invoke_at_step(self, step: int) -> bool:
        return False


class NoArguments(Rule):
    def invoke_at_step(self, step: int) -> bool:
        return False


def spec(name: str, rule_only: tuple[str, ...] = (), **parameters: str) -> RuleSpec:
    return RuleSpec(
        name=name, configuration_name=name, parameters=parameters, rule_only=list(rule_only)
    )


def test_misspelt_parameter_names_rule_and_close_match() -> None:
    """A parameter the only rule does not take: its name, the rule, the close valid name."""
    routed = route_parameters(
        [spec("VanishingGradient", treshold="1e-12")], {"VanishingGradient": VG}
    )
    error = routed["VanishingGradient"]
    assert isinstance(error, ConfigurationError)
    assert str(error) == (
        "unknown parameter 'treshold' for rule VanishingGradient: did you "
        "mean 'threshold'? Its parameters: threshold"
    )


def test_close_evaluator_keys_are_suggested() -> None:
    """A misspelt evaluator key (start_stpe) is suggested as start_step."""
    error = route_parameters(
        [spec("VanishingGradient", start_stpe="3")], {"VanishingGradient": VG}
    )["VanishingGradient"]
    assert "did you mean 'start_step'?" in str(error)


def test_parameter_reaches_only_the_rules_that_take_it() -> None:
    """With two rules, a parameter only one takes is given to that one, silently."""
    specs = [
        spec("VanishingGradient", threshold="1", only_nan="true"),
        spec("ExplodingTensor", threshold="1", only_nan="true"),
    ]
    routed = route_parameters(specs, {"VanishingGradient": VG, "ExplodingTensor": ET})
    assert routed == {
        "VanishingGradient": {"threshold": "1"},
        "ExplodingTensor": {"only_nan": "true"},
    }


def test_parameter_no_rule_takes_fails_every_rule() -> None:
    """A parameter none of the rules takes is an error on each, listing every rule's names."""
    specs = [spec("VanishingGradient", treshold="1"), spec("ExplodingTensor", treshold="1")]
    routed = route_parameters(specs, {"VanishingGradient": VG, "ExplodingTensor": ET})
    for error in routed.values():
        assert isinstance(error, ConfigurationError)
        assert str(error) == (
            "unknown parameter 'treshold': no rule of this run takes it; did you mean "
            "'threshold'? Parameters: VanishingGradient: threshold; ExplodingTensor: "
            "collection_names, tensor_regex, only_nan"
        )


def test_rule_only_parameter_the_rule_does_not_take_fails_that_rule() -> None:
    """A per-rule parameter its rule does not take fails that rule, even if another takes it."""
    specs = [spec("VanishingGradient", ("only_nan",), only_nan="true"), spec("ExplodingTensor")]
    routed = route_parameters(specs, {"VanishingGradient": VG, "ExplodingTensor": ET})
    assert "unknown parameter 'only_nan' for rule VanishingGradient" in str(
        routed["VanishingGradient"]
    )
    assert routed["ExplodingTensor"] == {}


def test_kwargs_rule_takes_everything_but_reserved_keys() -> None:
    """A constructor with **kwargs takes any key; action_str is never a user's parameter."""
    routed = route_parameters([spec("TakesAnything", knob="1")], {"TakesAnything": TakesAnything})
    assert routed["TakesAnything"] == {"knob": "1"}
    error = route_parameters(
        [spec("TakesAnything", action_str="x")], {"TakesAnything": TakesAnything}
    )["TakesAnything"]
    assert "unknown parameter 'action_str'" in str(error) and "'action_json'" in str(error)


def test_a_rule_that_failed_to_load_is_skipped_and_blocks_no_rule() -> None:
    """A rule whose class did not load (None) gets no entry; others keep their parameters."""
    specs = [spec("VanishingGradient", knob="1"), spec("Missing", knob="1")]
    routed = route_parameters(specs, {"VanishingGradient": VG, "Missing": None})
    assert routed == {"VanishingGradient": {}}


def test_rule_without_parameters_says_none() -> None:
    """A rule taking no parameters says so."""
    error = route_parameters([spec("NoArguments", x="1")], {"NoArguments": NoArguments})
    assert str(error["NoArguments"]).endswith("Its parameters: none")


def test_effective_parameters_include_defaults() -> None:
    """Every constructor argument: the given value, else the environment's, else the default
    (as a string; None stays None); **kwargs extras are listed too."""
    assert effective_parameters(VG, {}, {}) == {"threshold": "0.0000001"}
    assert effective_parameters(ET, {"only_nan": "true"}, {"tensor_regex": "g.*"}) == {
        "collection_names": None,
        "tensor_regex": "g.*",
        "only_nan": "true",
    }
    assert effective_parameters(TakesAnything, {"knob": "1"}, {}) == {"window": "3", "knob": "1"}


def test_build_rule_refuses_unknown_parameters() -> None:
    """build_rule itself refuses a key the constructor does not take (no silent ignore)."""
    with pytest.raises(
        ConfigurationError, match="unknown parameter 'treshold' for rule VanishingGradient"
    ):
        build_rule(VG, object(), {"treshold": "1"})
