"""Rule parameters that are regular expressions run in linear time (RE2 where it answers as
``re.search``) and are bounded in length: a catastrophic pattern cannot hold a rule."""

from __future__ import annotations

import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules.kit.params import parse_regex
from evaluator.rules.kit.selection import TensorSelection

EVIL = "^(a+)+$"


def test_a_catastrophic_regex_parameter_answers_at_once() -> None:
    """parse_regex's pattern finds nothing in a long almost-matching name without
    backtracking (Python's re would take hours on 5000 characters)."""
    pattern = parse_regex("ClassImbalance", "labels_regex", EVIL)
    assert pattern.engine == "re2" and pattern.pattern == EVIL
    assert not pattern.search("a" * 5000 + "!")
    assert pattern.search("aaaa")


def test_an_over_long_regex_parameter_is_a_configuration_error() -> None:
    """A regex over max_regex_length characters is refused naming the rule and parameter."""
    with pytest.raises(ConfigurationError, match="ClassImbalance parameter labels_regex"):
        parse_regex("ClassImbalance", "labels_regex", "a" * 5000)
    with pytest.raises(ConfigurationError, match="AllZero parameter tensor_regex"):
        TensorSelection("AllZero", None, "b" * 5000)
