"""A run killed mid-way (SIGKILL of the evaluation: the OOM killer, a spot interruption) and run
again with the same output folder resumes: it keeps the earlier firings and verdicts, replays
what rules with history need, says it resumed, and reaches the verdict of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import ROOT, EvaluatorCli, child_of
from tests.support.rule_code import COUNTS_STEPS
from tests.support.waits import wait_until

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(COUNTS_STEPS)
    return path


def _args(rules_file: Path) -> list[str]:
    return [
        "--trial-dir",
        EXAMPLE,
        "--rule",
        "CountsSteps",
        "--source_s3_uri",
        str(rules_file),
        "--continue_after_fire",
        "true",
    ]


def test_killed_run_resumes_to_the_uninterrupted_verdict(tmp_path: Path, rules_file: Path) -> None:
    """SIGKILL of the evaluation after its first firing, then a rerun: the same fired steps,
    step count and exit code as a run never interrupted, and a log line saying it resumed."""
    whole = EvaluatorCli(tmp_path / "whole")(*_args(rules_file))
    assert whole.returncode == 1, whole.describe()
    expected = whole.result
    assert expected is not None and expected["fired_steps"] == [3, 11]

    cli = EvaluatorCli(tmp_path / "killed")
    process = cli.command(*_args(rules_file)).start()
    result_path = cli.output_dir / "rule_evaluation_result.json"
    _wait_for(lambda: (_read(result_path).get("step") or 0) > 5)  # past the first firing
    os.kill(child_of(process.pid), signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == 3
    killed = _read(result_path)
    assert killed["status"] == "Error" and 3 < killed["rules"][0]["step"] < 11

    again = cli(*_args(rules_file))
    assert again.returncode == 1, again.describe()
    result = again.result
    assert result is not None
    assert result["fired_steps"] == expected["fired_steps"]
    assert result["rules"][0]["steps_evaluated"] == expected["rules"][0]["steps_evaluated"]
    assert result["resumed"] == {"CountsSteps": killed["rules"][0]["step"]}
    resumed = [line for line in again.log_lines if line["event"] == "evaluation_resumed"]
    assert resumed and resumed[0]["replays_up_to"] == {"CountsSteps": killed["rules"][0]["step"]}
    fired = [line["step"] for line in again.log_lines if line["event"] == "rule_fired"]
    assert fired == [11]  # the earlier firing is kept, not reported twice


def test_a_finished_run_is_not_resumed(tmp_path: Path, rules_file: Path) -> None:
    """A rerun after a run that reached its verdict starts over and says why."""
    cli = EvaluatorCli(tmp_path)
    first = cli(*_args(rules_file), "--delay", "0")
    assert first.returncode == 1, first.describe()
    second = cli(*_args(rules_file), "--delay", "0")
    assert second.returncode == 1, second.describe()
    assert second.result is not None and second.result["resumed"] is None
    replaced = [line for line in second.log_lines if line["event"] == "earlier_result_replaced"]
    assert replaced and "finished" in replaced[0]["reason"]


def test_other_parameters_start_over(tmp_path: Path, rules_file: Path) -> None:
    """An unfinished earlier run with other parameters is not resumed."""
    cli = EvaluatorCli(tmp_path)
    first = cli(*_args(rules_file), "--delay", "0")
    document = json.loads(first.result_path.read_text())
    document.update(status="InProgress", exit_code=None)
    first.result_path.write_text(json.dumps(document))
    second = cli(*_args(rules_file), "--delay", "0.0")
    assert second.result is not None and second.result["resumed"] is None
    replaced = [line for line in second.log_lines if line["event"] == "earlier_result_replaced"]
    assert replaced and "parameters" in replaced[0]["reason"]


def _read(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _wait_for(condition: Any, timeout: float = 30) -> None:
    assert wait_until(condition, timeout=timeout, interval=0.02), "timed out waiting for the run"
