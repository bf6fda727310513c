"""rule_step_timeout: seconds one rule step may take, off unless given; a run-level setting,
never a rule parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.config import load_config
from evaluator.errors import ConfigurationError

BASE = {"rule_to_invoke": "VanishingGradient", "base_trial": "s3://bucket/job/debug-output"}


def test_rule_step_timeout_is_off_by_default(tmp_path: Path) -> None:
    """Without the key, config.rule_step_timeout is None."""
    config = load_config([], BASE, opt_ml_root=tmp_path, stdout_is_tty=False)
    assert config.rule_step_timeout is None


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--rule-step-timeout", "2.5"], BASE),
        ([], {**BASE, "rule_step_timeout": "2.5"}),
        ([], {**BASE, "RULE_STEP_TIMEOUT": " 2.5 "}),
    ],
)
def test_rule_step_timeout_is_read_from_every_source(
    tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    """A flag or an environment variable sets it, as a float, and no rule receives it."""
    config = load_config(argv, env, opt_ml_root=tmp_path, stdout_is_tty=False)
    assert config.rule_step_timeout == 2.5
    assert "rule_step_timeout" not in config.rules[0].parameters


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_rule_step_timeout_names_the_key(tmp_path: Path, value: str) -> None:
    """Anything but a finite number of seconds > 0 is a ConfigurationError naming the key."""
    with pytest.raises(ConfigurationError, match="rule_step_timeout must be a number of seconds"):
        load_config([], {**BASE, "rule_step_timeout": value}, opt_ml_root=tmp_path)
