"""The command explains itself: ``--help``, ``--version``, ``rules [NAME]``, ``--rule NAME --help``,
run as a user runs them (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import evaluator
from evaluator.config.keys import ALIASES, KNOWN_KEYS, TRIAL_OPTION_KEYS
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from rules_builtin import registry
from tests.support.evaluator_cli import ROOT, EvaluatorCli


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    return EvaluatorCli(tmp_path)


def test_help_names_every_flag_by_group(cli: EvaluatorCli) -> None:
    """--help lists every known key and alias as a flag, under the six groups, with the commands
    and where the docs are; the tuning trial options (--help-env lists them, each with its
    flag) through --<trial-option>."""
    run = cli("--help")
    assert run.returncode == 0, run.describe()
    flags = [f"--{k.replace('_', '-')}" for k in (*KNOWN_KEYS, *ALIASES)]
    tuning = {f"--{k.replace('_', '-')}" for k in TRIAL_OPTION_KEYS}
    assert [f for f in flags if f not in run.stdout and f not in tuning] == []
    assert "--<trial-option>" in run.stdout
    env = cli("--help-env")
    assert [f for f in tuning if f not in env.stdout] == []
    for group in ("trial:", "rule:", "parameters:", "output:", "logging:", "waiting:"):
        assert f"\n{group}\n" in run.stdout
    for text in ("rules NAME", "summary PATH", "README.md", "docs/rules.md", "docs/container.md"):
        assert text in run.stdout
    assert "no description" not in run.stdout


def test_help_shows_defaults_from_the_configuration(cli: EvaluatorCli) -> None:
    """--help gives the defaults the configuration uses (poll 1 s, progress 10 s, INFO, the
    output folder in and out of SageMaker)."""
    out = " ".join(cli("--help").stdout.split())
    assert "/opt/ml/processing/output/rule under SageMaker" in out and "./rule-output" in out
    assert "POLL_INTERVAL; default: 1 s" in out
    assert "PROGRESS_INTERVAL; default: 10 s" in out
    assert "LOG_LEVEL; default: INFO" in out


def test_short_help_is_the_same_as_help(cli: EvaluatorCli) -> None:
    """-h prints exactly what --help prints."""
    assert cli("-h").stdout == cli("--help").stdout


def test_version_prints_the_package_version(cli: EvaluatorCli) -> None:
    """--version prints evaluator.__version__ and exits 0."""
    run = cli("--version")
    assert (run.returncode, run.stdout) == (0, f"rule-evaluator {evaluator.__version__}\n")


def test_installed_console_script_answers_version() -> None:
    """The installed rule-evaluator script (the venv's) answers --version too."""
    script = Path(sys.executable).parent / "rule-evaluator"
    if not script.exists():
        pytest.skip("rule-evaluator is not installed next to this Python")
    done = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, f"rule-evaluator {evaluator.__version__}\n")


def test_rules_lists_each_builtin_rule_in_one_line(cli: EvaluatorCli) -> None:
    """`rules` prints one line per built-in rule: its name, then what it detects."""
    run = cli("rules")
    assert run.returncode == 0, run.describe()
    lines = {line.split()[0]: line for line in run.stdout.splitlines() if line.strip()}
    assert [n for n in registry.names() if n not in lines] == []
    assert "mean absolute value falls below a threshold" in lines["VanishingGradient"]


def test_rules_name_shows_parameters_and_an_example(cli: EvaluatorCli) -> None:
    """`rules vanishinggradient` (any case) gives its parameter's type, default and meaning, and
    an example command."""
    run = cli("rules", "vanishinggradient")
    assert run.returncode == 0, run.describe()
    assert "--threshold" in run.stdout and "float, default 0.0000001" in run.stdout
    assert "Fire when a gradient's mean absolute value is below this." in run.stdout
    assert "rule-evaluator --trial-dir PATH_OR_S3_URI --rule VanishingGradient" in run.stdout


def test_rule_flag_with_help_is_rules_name(cli: EvaluatorCli) -> None:
    """`--rule VanishingGradient --help` prints what `rules VanishingGradient` prints."""
    run = cli("--rule", "VanishingGradient", "--threshold", "1e-6", "--help")
    assert run.returncode == 0, run.describe()
    assert run.stdout == cli("rules", "VanishingGradient").stdout


@pytest.mark.parametrize(
    "args", [("rules", "VanishingGradiant"), ("--rule", "VanishingGradiant", "--help")]
)
def test_unknown_rule_name_exits_2_with_did_you_mean(
    cli: EvaluatorCli, args: tuple[str, ...]
) -> None:
    """An unknown rule name exits 2 and suggests the nearest built-in rule."""
    run = cli(*args)
    assert run.returncode == 2, run.describe()
    assert "did you mean VanishingGradient?" in run.stderr
    assert run.stdout == ""


def test_rules_name_source_prints_the_rules_module(cli: EvaluatorCli) -> None:
    """`rules vanishinggradient --source` prints the module that defines the rule as a rule
    file of your own: its helpers from the public rule kit, ``@register`` (which makes a
    built-in) replaced by ``@records_comparisons``, every other line as installed."""
    run = cli("rules", "vanishinggradient", "--source")
    assert run.returncode == 0, run.describe()
    module = (ROOT / "rules_builtin" / "vanishing_gradient.py").read_text(encoding="utf-8")
    assert run.stdout == module.replace(
        "from rules_builtin.registry import register\n",
        "from rules_builtin.kit import records_comparisons\n",
    ).replace("\n@register\n", "\n@records_comparisons\n")
    assert "from evaluator.rules.kit." in run.stdout and "register\n" not in run.stdout


def test_source_without_a_rule_name_exits_2(cli: EvaluatorCli) -> None:
    """`rules --source` without NAME is a usage error that says NAME is needed."""
    run = cli("rules", "--source")
    assert run.returncode == 2, run.describe()
    assert "--source needs a rule NAME" in run.stderr


def test_a_copied_builtin_rule_runs_as_your_own_rule(cli: EvaluatorCli, tmp_path: Path) -> None:
    """The source `rules NAME --source` prints, with only its class renamed, runs as the user's
    rule (--source_s3_uri) and fires where the built-in would."""
    source = cli("rules", "VanishingGradient", "--source").stdout
    source = source.replace("VanishingGradient", "TinyGradient")
    assert "rules_builtin.registry" not in source and "@records_comparisons" in source
    rule_file = tmp_path / "my_rules.py"
    rule_file.write_text(source, encoding="utf-8")
    trial = tmp_path / "trial"
    writer = TrialWriter(trial)
    writer.write_collections([Collection("gradients", include_regex=["^g"])])
    for step in range(4):
        value = np.full(4, 1.0 if step < 2 else 1e-4, np.float32)
        writer.write_step(step, {"g": value}, mode=ModeKeys.TRAIN)
    writer.end_training()
    run = cli(
        "--trial-dir",
        str(trial),
        "--source_s3_uri",
        str(rule_file),
        "--rule",
        "TinyGradient",
        "--threshold",
        "0.01",
    )
    assert run.returncode == 1, run.describe()
    result = run.result
    assert result is not None and result["fired_steps"] == [2]


def test_rules_loss_not_decreasing_fits_a_screen_and_verbose_has_the_rest(
    cli: EvaluatorCli,
) -> None:
    """The installed command's `rules LossNotDecreasing` is at most 40 lines; `--verbose`
    prints the whole description (its formula and diagnosis included)."""
    short = cli("rules", "LossNotDecreasing")
    assert short.returncode == 0, short.describe()
    assert len(short.stdout.splitlines()) <= 40
    verbose = cli("rules", "LossNotDecreasing", "--verbose")
    assert verbose.returncode == 0, verbose.describe()
    for text in ("Formula (the sources disagree", "Diagnosis: every firing"):
        assert text not in short.stdout and text in verbose.stdout


def test_help_env_is_answered_without_running_a_rule(cli: EvaluatorCli) -> None:
    """`--help-env` exits 0 with the tuning variables, which --help no longer lists."""
    run = cli("--help-env")
    assert run.returncode == 0, run.describe()
    assert "EVALUATOR_RAW_CACHE_MB, --raw-cache-mb (default 128.0)" in run.stdout
    assert "EVALUATOR_RAW_CACHE_MB" not in cli("--help").stdout
