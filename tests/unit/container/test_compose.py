"""The composition of a run (``container.compose``): a sink registered there (one module, one
``register_sink``) hears the evaluation's events and the supervisor's last word, beside the
outputs every run has; a failing one changes nothing."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from container import compose
from container.cli import evaluate
from container.compose import final_sinks, register_sink
from container.last_word import conclude
from evaluator.report import REPORT_FILE_NAME
from evaluator.reporting import StatusReporter
from evaluator.sinks import NullSink, StatusChanged
from evaluator.status import RESULT_FILE_NAME, condition_met_message
from tests.support.recording_sink import ENV, recorded, recording_sink

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "trials" / "vanishing_gradients"


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The recording sink registered for one test; the file it writes to."""
    monkeypatch.setattr(compose, "SINKS", list(compose.SINKS))
    register_sink(recording_sink)
    target = tmp_path / "events.jsonl"
    monkeypatch.setenv(ENV, str(target))
    yield target


def test_a_registered_sink_hears_the_whole_evaluation(registered: Path, tmp_path: Path) -> None:
    """A run of the command tells the registered sink that it started, each status change,
    each judged step and firing, and its verdict: the exit code the command returns."""
    trial = tmp_path / "trial"
    shutil.copytree(EXAMPLE, trial)
    output = tmp_path / "out"
    argv = ["--trial-dir", str(trial), "--rule", "VanishingGradient", "--output-dir", str(output)]
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    events = recorded(registered)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "evaluation_started" and events[0]["trial"] == str(trial)
    assert kinds[-1] == "evaluation_ended" and events[-1]["exit_code"] == code
    statuses = [e["status"] for e in events if e["event"] == "status_changed"]
    result = json.loads((output / RESULT_FILE_NAME).read_text(encoding="utf-8"))
    assert statuses == ["InProgress", result["rules"][0]["status"]]
    judged = [e["step"] for e in events if e["event"] == "step_judged"]
    assert len(judged) == result["rules"][0]["steps_evaluated"] > 0
    fired = [e["step"] for e in events if e["event"] == "rule_fired"]
    assert fired == result["rules"][0]["fired_steps"]
    assert not any(e["supervisor"] for e in events)
    assert (output / REPORT_FILE_NAME).is_file()  # the report sink is still there


def test_the_supervisors_last_word_reaches_every_sink(registered: Path, tmp_path: Path) -> None:
    """A step over rule_step_timeout, said by the supervisor: the message files, the result
    file, the report (saying why) and the registered sink all get it."""
    output, messages = tmp_path / "output", tmp_path / "messages"
    messages.mkdir()
    reporter = StatusReporter(["Sleeps"], output_dir=output, message_dir=messages)
    reporter.start("Sleeps")
    reporter.step_evaluated("Sleeps", 0)  # the run is killed here: InProgress in the file
    result_fd = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    message_fd = os.open(messages, os.O_RDONLY | os.O_DIRECTORY)
    try:
        state = {"result_dir": str(output), "message_dir": str(messages), "report": "html"}
        code = conclude(
            stops=[],
            overrun=("Sleeps", 1, 2.0),
            untrusted=True,
            verdict=None,
            said_done=False,
            result_fd=result_fd,
            message_fd=message_fd,
            wait_status=9,
            sinks=final_sinks(state, result_fd, message_fd),
            result_dir=str(output),
        )
    finally:
        os.close(result_fd)
        os.close(message_fd)
    assert code == 2
    why = "Rule Sleeps spent more than 2 s on step 1"
    assert (messages / "message").read_text(encoding="utf-8").startswith(f"ClientError: {why}")
    result = json.loads((output / RESULT_FILE_NAME).read_text(encoding="utf-8"))
    assert result["status"] == "Error" and why in result["rules"][0]["details"]
    assert why in (output / REPORT_FILE_NAME).read_text(encoding="utf-8")
    [closed] = recorded(registered)
    assert closed["event"] == "run_closed" and closed["supervisor"] is True
    assert (closed["status"], closed["exit_code"]) == ("Error", 2) and why in closed["text"]


def test_a_stop_said_by_the_supervisor_writes_no_report(registered: Path, tmp_path: Path) -> None:
    """After a stop signal the supervisor's last word writes the status files, not a report
    (the seconds a stop leaves belong to them); the registered sink still hears it."""
    output = tmp_path / "output"
    reporter = StatusReporter(["R"], output_dir=output, message_dir=None)
    reporter.start("R")
    result_fd = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    try:
        state = {"result_dir": str(output), "report": "html"}
        code = conclude(
            stops=[15],
            overrun=None,
            untrusted=True,
            verdict=None,
            said_done=False,
            result_fd=result_fd,
            message_fd=None,
            wait_status=0,
            sinks=final_sinks(state, result_fd, None),
            result_dir=str(output),
        )
    finally:
        os.close(result_fd)
    assert code == 143
    assert json.loads((output / RESULT_FILE_NAME).read_text())["status"] == "Stopped"
    assert not (output / REPORT_FILE_NAME).exists()
    assert [e["status"] for e in recorded(registered)] == ["Stopped"]


def test_a_failing_sink_changes_nothing(tmp_path: Path) -> None:
    """A sink that raises is logged and skipped: the verdict and the files stand."""

    class Broken(NullSink):
        def status_changed(self, event: StatusChanged) -> None:
            raise RuntimeError("webhook down")

    messages = tmp_path / "messages"
    messages.mkdir()
    reporter = StatusReporter(
        ["R"], output_dir=tmp_path / "out", message_dir=messages, sinks=[Broken()]
    )
    reporter.start("R")
    reporter.fired("R", 3)
    reporter.finish("R")
    assert reporter.close() == 1
    assert (messages / "message").read_text(encoding="utf-8") == condition_met_message("R", 3)
    assert json.loads((tmp_path / "out" / RESULT_FILE_NAME).read_text())["exit_code"] == 1
