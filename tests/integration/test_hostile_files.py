"""Hostile files in the output folder (issue #25): a result file or report data file that is a
FIFO, nested 200,000 levels deep or holds fields of the wrong type ends a rerun (resume) or
``rule-evaluator report`` with a ClientError naming the file (exit 2), never exit 3 or a hang."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import ROOT, EvaluatorCli

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")
RESULT = "rule_evaluation_result.json"
ARGS = ("--trial-dir", EXAMPLE, "--rule", "VanishingGradient")


def _unfinished(document: dict[str, Any]) -> dict[str, Any]:
    """The document of a run killed midway: what a rerun resumes."""
    document.update(status="InProgress", exit_code=None)
    document["rules"][0].update(status="InProgress", exit_code=None)
    return document


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(document: dict[str, Any]) -> dict[str, Any]:
        document = _unfinished(document)
        target = document
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]  # type: ignore[index]
        target[keys[-1]] = value
        return document

    return change


SWAPS = {
    "exit_code_text": _set("exit_code", "abc"),
    "rule_exit_code_text": lambda d: {
        **_unfinished(d),
        "rules": [{**d["rules"][0], "status": "Error", "exit_code": "abc"}],
    },
    "fired_steps_text": _set("rules.0.fired_steps", "abc"),
    "step_list": _set("rules.0.step", [1, 2]),
    "evidence_list": lambda d: {
        **_unfinished(d),
        "rules": [{**d["rules"][0], "status": "IssuesFound", "exit_code": 1, "evidence": [1]}],
    },
}


@pytest.fixture
def finished(tmp_path: Path) -> EvaluatorCli:
    cli = EvaluatorCli(tmp_path)
    run = cli(*ARGS)
    assert run.returncode == 1, run.describe()
    return cli


@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_a_type_swapped_result_file_is_a_client_error_on_resume(
    finished: EvaluatorCli, swap: str
) -> None:
    """A rerun that would resume from a result file with a field of the wrong type: exit 2,
    the message names the file and the field."""
    path = finished.output_dir / RESULT
    path.write_text(json.dumps(SWAPS[swap](json.loads(path.read_text()))))
    run = finished(*ARGS)
    assert run.returncode == 2, run.describe()
    assert run.message is not None and str(path) in run.message


def test_a_deeply_nested_result_file_is_a_client_error(finished: EvaluatorCli) -> None:
    """200,000 levels of nesting in the result file: exit 2 naming it, on resume and for
    `report`."""
    path = finished.output_dir / RESULT
    path.write_text("[" * 200_000 + "]" * 200_000)
    run = finished(*ARGS)
    assert run.returncode == 2, run.describe()
    assert run.message is not None and "nested too deeply" in run.message
    path.write_text("[" * 200_000 + "]" * 200_000)
    report = finished("report", str(finished.output_dir))
    assert report.returncode == 2, report.describe()
    assert str(path) in report.stderr


def test_a_fifo_for_a_result_file_does_not_hang(finished: EvaluatorCli) -> None:
    """A FIFO where the result file goes: the rerun and `report` end with exit 2 naming it."""
    path = finished.output_dir / RESULT
    path.unlink()
    os.mkfifo(path)
    report = finished("report", str(finished.output_dir), timeout=30)
    assert report.returncode == 2, report.describe()
    assert "FIFO" in report.stderr and str(path) in report.stderr
    run = finished(*ARGS, timeout=60)
    assert run.returncode == 2, run.describe()
    assert run.message is not None and "FIFO" in run.message


def test_a_fifo_for_report_data_does_not_hang(finished: EvaluatorCli) -> None:
    """A FIFO as rule_report_data.json: `report` draws the verdicts alone, at once."""
    data = finished.output_dir / "rule_report_data.json"
    data.unlink()
    os.mkfifo(data)
    report = finished("report", str(finished.output_dir), timeout=30)
    assert report.returncode == 0, report.describe()


@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_type_swapped_report_inputs_are_a_client_error(finished: EvaluatorCli, swap: str) -> None:
    """`report` on a result file with a field of the wrong type never exits 3."""
    path = finished.output_dir / RESULT
    document = SWAPS[swap](json.loads(path.read_text()))
    document["rules"][0]["parameters"] = "abc"
    path.write_text(json.dumps(document))
    data = finished.output_dir / "rule_report_data.json"
    data.write_text(json.dumps({"version": 1, "rules": {"VanishingGradient": {"series": "x"}}}))
    report = finished("report", str(finished.output_dir))
    assert report.returncode in (0, 2), report.describe()


@pytest.mark.parametrize("folder", ["index", "events"])
def test_a_fifo_in_the_trial_is_a_client_error_not_a_hang(tmp_path: Path, folder: str) -> None:
    """A FIFO in place of an index or event file of a local trial: exit 2 naming it, at once."""
    import shutil

    trial = tmp_path / "trial"
    shutil.copytree(EXAMPLE, trial)
    victim = sorted((trial / folder).rglob("*.*"))[2]
    victim.unlink()
    os.mkfifo(victim)
    run = EvaluatorCli(tmp_path)("--trial-dir", str(trial), "--rule", "VanishingGradient")
    assert run.returncode == 2, run.describe()
    assert str(victim) in run.stdout and "not a regular file" in run.stdout
