"""The report through the real command: a run with several rules writes rule_report.html beside
its result file and logs where, and ``rule-evaluator report OUTPUT_DIR`` writes it again from
the folder alone and prints its path."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.evaluator_cli import ROOT, EvaluatorCli

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")


def test_a_run_writes_the_report_and_report_rewrites_it(tmp_path: Path) -> None:
    """Two rules (one fires): the report names both and the firing step; after the folder is
    copied elsewhere and the report deleted, `report` draws it again from the data file."""
    cli = EvaluatorCli(tmp_path / "run")
    run = cli("--trial-dir", EXAMPLE, "--rule", "VanishingGradient,ExplodingTensor")
    assert run.returncode == 1, run.describe()
    report = run.output_dir / "rule_report.html"
    assert run.log_lines[-1]["event"] == "evaluation_finished"  # names the report
    assert run.log_lines[-1]["report"] == str(report.absolute()) and report.is_file()
    html = report.read_text()
    assert "VanishingGradient" in html and "ExplodingTensor" in html
    assert "fired at step 8" in html

    copy = tmp_path / "copied"
    shutil.copytree(run.output_dir, copy)
    (copy / "rule_report.html").unlink()
    again = EvaluatorCli(tmp_path / "again")("report", str(copy))
    assert again.returncode == 0, again.describe()
    assert again.stdout.strip() == str((copy / "rule_report.html").absolute())
    assert "fired at step 8" in (copy / "rule_report.html").read_text()


def test_report_on_a_folder_without_a_run_is_a_client_error(tmp_path: Path) -> None:
    """`report` on a folder holding no result file exits 2 saying what is missing."""
    run = EvaluatorCli(tmp_path)("report", str(tmp_path))
    assert run.returncode == 2, run.describe()
    assert "rule_evaluation_result.json" in run.stderr
