"""The value parsers: one boolean vocabulary for evaluator settings and rule parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.config import load_config
from evaluator.config.values import FALSE_WORDS, TRUE_WORDS, as_bool
from evaluator.errors import ConfigurationError
from evaluator.rules.kit.params import parse_bool

WORDS = sorted(TRUE_WORDS | FALSE_WORDS)


@pytest.mark.parametrize("word", WORDS)
def test_settings_and_rule_parameters_read_a_word_alike(
    word: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """continue_after_fire and a built-in rule's boolean parameter read every word the same."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trial").mkdir()
    spelled = f" {word.upper()} "
    config = load_config(
        ["--rule", "A", "--trial-dir", "trial", "--continue-after-fire", spelled],
        {},
        opt_ml_root=tmp_path / "opt_ml",
        stdout_is_tty=False,
    )
    assert config.continue_after_fire is parse_bool("Rule", "flag", spelled) is (word in TRUE_WORDS)


def test_the_words() -> None:
    """true/false, 1/0, yes/no, y/n and on/off, in any case; bools pass through."""
    assert TRUE_WORDS == {"true", "1", "yes", "y", "on"}
    assert FALSE_WORDS == {"false", "0", "no", "n", "off"}
    assert as_bool(True) is True and as_bool(False) is False
    assert as_bool("Yes") is True and as_bool(0) is False


@pytest.mark.parametrize("value", ["maybe", "", "2", "none", None, "t"])
def test_other_values_are_not_booleans(value: object) -> None:
    """Anything else is no boolean; a rule parameter says so, naming the rule and parameter."""
    assert as_bool(value) is None
    with pytest.raises(ConfigurationError, match="Rule parameter flag must be true or false"):
        parse_bool("Rule", "flag", value)
