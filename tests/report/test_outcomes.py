"""The report of every outcome of the real command (a subprocess, supervised, as a user runs
it): the verdict line comes first and stays the last line, ``--report none`` writes no report,
and a run whose evaluation was killed or overran its step time limit still gets one, written
by the supervisor from the result file."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest

from evaluator.report import DATA_FILE_NAME, REPORT_FILE_NAME
from tests.support.evaluator_cli import ROOT, EvaluatorCli, child_of
from tests.support.waits import wait_until

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")

RULES = textwrap.dedent("""
    import time

    from smdebug.rules import Rule


    class SleepsAtStep3(Rule):
        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                self.base_trial.tensor(name).value(step)
            if step == 3:
                time.sleep(3600)
            return False
""")


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


def test_the_verdict_is_the_last_line_and_names_the_report(tmp_path: Path) -> None:
    """A firing run: evaluation_finished is the last line on stdout and names the report,
    which exists when the command has ended."""
    cli = EvaluatorCli(tmp_path)
    run = cli("--trial-dir", EXAMPLE, "--rule", "VanishingGradient")
    assert run.returncode == 1, run.describe()
    last = run.log_lines[-1]
    assert last["event"] == "evaluation_finished", run.describe()
    assert last["report"] == str(cli.output_dir / REPORT_FILE_NAME)
    html = (cli.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    assert "fired at step 8." in html and "What to try" in html


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_report_none_writes_no_report(tmp_path: Path, how: str) -> None:
    """--report none (or REPORT=none): no report, no data file, and the verdict names none."""
    cli = EvaluatorCli(tmp_path)
    flags = ["--report", "none"] if how == "flag" else []
    env = {"REPORT": "none"} if how == "environment" else None
    run = cli("--trial-dir", EXAMPLE, "--rule", "VanishingGradient", *flags, env=env)
    assert run.returncode == 1, run.describe()
    assert "report" not in run.log_lines[-1]
    assert not (cli.output_dir / REPORT_FILE_NAME).exists()
    assert not (cli.output_dir / DATA_FILE_NAME).exists()


def test_a_killed_evaluation_gets_its_report(tmp_path: Path, rules_file: Path) -> None:
    """The evaluation killed by SIGKILL mid-run (the OOM killer): the supervisor writes the
    report from the result file (Error with its InternalServerError) and the data file the
    running evaluation kept current (the curves of what the rule read before)."""
    cli = EvaluatorCli(tmp_path)
    process = cli.command(
        "--trial-dir", EXAMPLE, "--rule", "SleepsAtStep3", "--source_s3_uri", str(rules_file),
        env={"EVALUATOR_REPORT_DATA_INTERVAL": "0.2"},
    ).start()  # fmt: skip
    data = cli.output_dir / DATA_FILE_NAME
    wait_until(lambda: _holds_series(data), timeout=30)
    os.kill(child_of(process.pid), signal.SIGKILL)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3, (out, err)
    html = (cli.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    assert "SleepsAtStep3" in html and "InternalServerError" in html and "SIGKILL" in html
    assert "The curves behind the verdict" in html and "gradients/layer0_weight" in html


def _holds_series(data_file: Path) -> bool:
    try:
        rules = json.loads(data_file.read_text())["rules"]
    except (OSError, ValueError):
        return False
    return any(entry.get("series") for entry in rules.values())


def test_a_step_over_its_time_limit_gets_a_report(tmp_path: Path, rules_file: Path) -> None:
    """A rule step over rule_step_timeout: the run ends with its ClientError, and the report
    names the rule and the limit."""
    cli = EvaluatorCli(tmp_path)
    run = cli(
        "--trial-dir", EXAMPLE, "--rule", "SleepsAtStep3", "--source_s3_uri", str(rules_file),
        "--rule_step_timeout", "2", timeout=60,
    )  # fmt: skip
    assert run.returncode == 2, run.describe()
    result = json.loads((cli.output_dir / "rule_evaluation_result.json").read_text())
    assert result["rules"][0]["error_type"] == "RuleStepTimeout"
    html = (cli.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    assert "SleepsAtStep3 spent more than 2 s on step 3" in html
