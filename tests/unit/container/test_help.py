"""What the command prints about itself (`container.help`), in one process: `rules NAME` fits a
screen for every built-in rule with `--verbose` for the rest, and `--help` keeps to the flags
while `--help-env` gives the tuning environment variables."""

from __future__ import annotations

import pytest

from container.cli import run
from evaluator.config import TRIAL_ENVIRONMENT, TrialOptions
from evaluator.config.keys import TRIAL_OPTION_KEYS
from rules_builtin import registry
from rules_builtin._describe import description, parameters, rule_class, summary

MAX_LINES = 40


def _printed(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert run(list(argv)) == 0
    return capsys.readouterr().out


def _plain(text: str) -> str:
    """``text`` as the terminal shows it: without reST's code marks, whitespace folded."""
    return " ".join(text.replace("``", "").split())


@pytest.mark.parametrize("name", registry.names())
def test_rules_name_fits_in_40_lines_with_what_a_user_needs_first(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`rules NAME` is at most 40 lines and holds what the rule detects (its summary and first
    paragraph), each parameter's name, default and meaning on one line, and an example."""
    out = _printed(capsys, "rules", name)
    cls = rule_class(name)
    assert len(out.splitlines()) <= MAX_LINES, out
    assert out.startswith(f"{name}: {summary(cls)}\n")
    assert _plain(description(cls).split("\n\n")[0]) in _plain(out)
    for p in parameters(cls):
        [line] = [ln for ln in out.splitlines() if ln.lstrip().startswith(f"--{p.name} ")]
        assert f", default {p.default if p.default is not None else 'none'}" in line or p.required
        assert _plain(p.doc) in _plain(line)
    assert f"rule-evaluator --trial-dir PATH_OR_S3_URI --rule {name}" in out
    assert f"rules {name} --verbose" in out


@pytest.mark.parametrize("name", registry.names())
def test_rules_name_verbose_shows_the_full_description(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`rules NAME --verbose` holds the rule's summary, its whole description, and every
    parameter's name, type, default and meaning."""
    out = _printed(capsys, "rules", name, "--verbose")
    cls = rule_class(name)
    assert out.startswith(f"{name}: {summary(cls)}\n")
    assert _plain(description(cls)) in _plain(out)
    for p in parameters(cls):
        assert f"--{p.name}" in out and _plain(p.doc) in _plain(out)


def test_a_long_rule_is_cut_to_its_first_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    """LossNotDecreasing (over 100 lines with --verbose) shows its later paragraphs, such as
    the formula, only with --verbose."""
    later = "Formula (the sources disagree; this is our choice)"
    assert later not in _printed(capsys, "rules", "LossNotDecreasing")
    verbose = _printed(capsys, "rules", "LossNotDecreasing", "--verbose")
    assert later in verbose and len(verbose.splitlines()) > 2 * MAX_LINES


def test_verbose_without_a_rule_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`rules --verbose` without NAME exits 2 saying NAME is needed."""
    assert run(["rules", "--verbose"]) == 2
    assert "--verbose needs a rule NAME" in capsys.readouterr().err


def test_help_lists_flags_not_the_tuning_environment(capsys: pytest.CaptureFixture[str]) -> None:
    """--help names no tuning environment variable, and says where they are (--help-env)."""
    out = _printed(capsys, "--help")
    assert [var for var in TRIAL_ENVIRONMENT if var in out] == []
    assert "--help-env" in out and "--trial-dir" in out


def test_every_trial_option_is_a_flag_listed_by_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Every trial option but the SageMaker job's own (its stop signal) is a flag: the
    TensorBoard ones by name in --help, the others through --<trial-option> and --help-env."""
    sagemakers = {"stop_signal_file", "stop_grace_seconds", "poll_interval"}
    assert set(TRIAL_ENVIRONMENT.values()) - sagemakers == TRIAL_OPTION_KEYS
    out = _printed(capsys, "--help")
    for flag in ("--tensorboard-run", "--tensorboard-tag-phases", "--trial-format"):
        assert flag in out
    assert "--<trial-option>" in out and "--prefetch-steps" in out


def test_help_env_lists_every_tuning_variable_with_its_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--help-env gives each variable of TRIAL_ENVIRONMENT with its default and meaning, and
    where the docs' table is."""
    out = _printed(capsys, "--help-env")
    folded = _plain(out)
    fields = TrialOptions.model_fields
    for var, name in TRIAL_ENVIRONMENT.items():
        default = fields[name].default
        flag = f", --{name.replace('_', '-')}" if name in TRIAL_OPTION_KEYS else ""
        assert f"{var}{flag} (default {'none' if default is None else default}):" in folded
        assert _plain(str(fields[name].description)) in folded
    assert "docs/configuration.md" in out
