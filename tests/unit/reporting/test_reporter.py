"""StatusReporter: status and result files, progress rate, console display, exit code."""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from evaluator.config import RuleSpec
from evaluator.errors import ConfigurationError
from evaluator.reporting import StatusReporter
from evaluator.status import (
    RESULT_FILE_NAME,
    RuleStatus,
    condition_met_message,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """An output folder and an existing message folder (standing in for /opt/ml/output)."""
    message_dir = tmp_path / "opt_ml" / "output"
    message_dir.mkdir(parents=True)
    return tmp_path / "out", message_dir


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    """The structlog events logged during the test."""
    with capture_logs() as captured:
        yield captured


def _reporter(
    dirs: tuple[Path, Path], rules: list[RuleSpec | str] | None = None, **kwargs: Any
) -> StatusReporter:
    return StatusReporter(
        rules or ["VanishingGradient"],
        output_dir=dirs[0],
        message_dir=dirs[1],
        trial="s3://b/job/debug-output",
        **kwargs,
    )


def _result(dirs: tuple[Path, Path]) -> dict[str, Any]:
    return json.loads((dirs[0] / RESULT_FILE_NAME).read_text(encoding="utf-8"))


def test_issues_found_run(dirs: tuple[Path, Path], logs: list[dict[str, Any]]) -> None:
    """A fired rule exits 1 and writes the exact condition-met text to message and failure."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    for step in range(3):
        reporter.step_evaluated("VanishingGradient", step)
    reporter.fired("VanishingGradient", 2)
    reporter.finish("VanishingGradient")
    assert reporter.close() == 1
    text = condition_met_message("VanishingGradient", 2)
    assert (dirs[1] / "message").read_text(encoding="utf-8") == text
    assert (dirs[1] / "failure").read_text(encoding="utf-8") == text
    statuses = [(e["status"], e["step"]) for e in logs if e["event"] == "rule_status"]
    assert statuses == [("InProgress", None), ("IssuesFound", 2)]


def test_result_file_of_one_rule(dirs: tuple[Path, Path]) -> None:
    """The result file holds the rule's fields at the top level and in ``rules``."""
    spec = RuleSpec(
        name="VanishingGradient",
        configuration_name="vg",
        parameters={"threshold": "0.1", "api_token": "s3cr3t"},
    )
    reporter = _reporter(dirs, [spec])
    reporter.start("vg")
    reporter.step_evaluated("vg", 0)
    reporter.step_evaluated("vg", 5)
    reporter.fired("vg", 5)
    reporter.finish("vg")
    reporter.close()
    doc = _result(dirs)
    assert doc["version"] == 1
    assert (doc["status"], doc["exit_code"], doc["rule"], doc["step"], doc["fired_steps"]) == (
        "IssuesFound",
        1,
        "VanishingGradient",
        5,
        [5],
    )
    assert doc["details"] == doc["message"] == condition_met_message("VanishingGradient", 5)
    assert doc["parameters"] == {"threshold": "0.1", "api_token": "***"}
    assert doc["trial"] == "s3://b/job/debug-output"
    rule = doc["rules"][0]
    assert (rule["configuration_name"], rule["steps_evaluated"], rule["error_type"]) == (
        "vg",
        2,
        None,
    )
    assert rule["started_at"].endswith("Z") and rule["finished_at"].endswith("Z")
    assert "s3cr3t" not in (dirs[0] / RESULT_FILE_NAME).read_text()


def test_no_issues_writes_no_message(dirs: tuple[Path, Path]) -> None:
    """NoIssuesFound exits 0 and leaves the message folder alone."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    reporter.step_evaluated("VanishingGradient", 9)
    reporter.finish("VanishingGradient")
    assert reporter.close() == 0
    assert list(dirs[1].iterdir()) == []
    doc = _result(dirs)
    assert (doc["status"], doc["step"], doc["message"], doc["details"]) == (
        "NoIssuesFound",
        9,
        None,
        None,
    )


def test_client_error(dirs: tuple[Path, Path], logs: list[dict[str, Any]]) -> None:
    """A ClientError ends Error with exit 2 and ``ClientError: <message>`` in the files."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    reporter.fail("VanishingGradient", ConfigurationError("threshold must be a number"))
    assert reporter.close() == 2
    assert (dirs[1] / "message").read_text() == "ClientError: threshold must be a number"
    assert _result(dirs)["rules"][0]["error_type"] == "ConfigurationError"
    [event] = [e for e in logs if e["event"] == "rule_status" and e["status"] == "Error"]
    assert event["log_level"] == "error" and "exc_info" not in event


def test_rule_code_error_keeps_traceback(
    dirs: tuple[Path, Path], logs: list[dict[str, Any]]
) -> None:
    """An exception from a user's rule is a client error whose traceback is logged and saved."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    try:
        float("abc")
    except ValueError as e:
        reporter.fail("VanishingGradient", e, client=True)
    assert reporter.close() == 2
    assert 'float("abc")' in _result(dirs)["rules"][0]["traceback"]
    assert any(isinstance(e.get("exc_info"), ValueError) for e in logs)


def test_stop_marks_running_rules(dirs: tuple[Path, Path]) -> None:
    """SIGTERM stops the running rules: Stopped, exit 143, ``Stopped`` in the message file."""
    reporter = _reporter(dirs, ["A", "B"])
    reporter.start("A")
    reporter.start("B")
    reporter.finish("A")
    reporter.stop(signal.SIGTERM)
    assert reporter.close() == 143
    assert (dirs[1] / "message").read_text() == "Stopped"
    doc = _result(dirs)
    assert [r["status"] for r in doc["rules"]] == ["NoIssuesFound", "Stopped"]
    assert doc["status"] == "Stopped"


def test_several_rules_result_file(dirs: tuple[Path, Path]) -> None:
    """Several rules give a list plus the overall status; the most severe outcome decides."""
    reporter = _reporter(dirs, ["A", "B", "C"])
    for name in ("A", "B", "C"):
        reporter.start(name)
    reporter.fired("A", 4)
    reporter.finish("A")
    reporter.fail("B", ConfigurationError("no collection named foo"))
    reporter.finish("C")
    assert reporter.close() == 2
    doc = _result(dirs)
    assert "rule" not in doc and "step" not in doc
    assert [(r["rule"], r["status"], r["exit_code"]) for r in doc["rules"]] == [
        ("A", "IssuesFound", 1),
        ("B", "Error", 2),
        ("C", "NoIssuesFound", 0),
    ]
    assert (doc["status"], doc["exit_code"]) == ("Error", 2)
    assert (dirs[1] / "message").read_text() == (
        "ClientError: no collection named foo\n" + condition_met_message("A", 4)
    )


def test_continue_after_fire_reports_every_step(
    dirs: tuple[Path, Path], logs: list[dict[str, Any]]
) -> None:
    """Each fire is logged; the status names the first step, the result file lists all."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    for step in (3, 8, 13):
        reporter.fired("VanishingGradient", step)
    reporter.finish("VanishingGradient")
    reporter.close()
    assert [e["step"] for e in logs if e["event"] == "rule_fired"] == [3, 8, 13]
    doc = _result(dirs)
    assert (doc["step"], doc["fired_steps"]) == (3, [3, 8, 13])


def test_a_read_failing_after_a_firing_keeps_issues_found(
    dirs: tuple[Path, Path], logs: list[dict[str, Any]]
) -> None:
    """An S3 outage (a StorageError) after the rule fired: IssuesFound stands, exit 1, and the
    error is written beside it; before any firing the same error is the rule's Error."""
    from evaluator.errors import StorageError

    reporter = _reporter(dirs, ["VanishingGradient", "ExplodingTensor"])
    reporter.start("VanishingGradient")
    reporter.start("ExplodingTensor")
    reporter.fired("VanishingGradient", 5)
    outage = StorageError("S3 did not answer within 60 s (5 attempts)")
    assert reporter.fail("VanishingGradient", outage).status is RuleStatus.ISSUES_FOUND
    assert reporter.fail("ExplodingTensor", outage).status is RuleStatus.ERROR
    assert reporter.close() == 2
    fired = _result(dirs)["rules"][0]
    assert fired["status"] == "IssuesFound" and fired["fired_steps"] == [5]
    assert fired["error_after_firing"] == f"StorageError: {outage}"
    assert _result(dirs)["rules"][1]["error_after_firing"] is None
    assert "read_failed_after_firing" in [e["event"] for e in logs]


def test_result_file_in_progress(dirs: tuple[Path, Path]) -> None:
    """Starting a rule already writes the result file, marked InProgress."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    doc = _result(dirs)
    assert (doc["status"], doc["exit_code"], doc["finished_at"]) == ("InProgress", None, None)
    assert doc["rules"][0]["status"] == "InProgress"


def test_result_file_is_replaced_atomically(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, logs: list[dict[str, Any]]
) -> None:
    """A failed write (a full disk) leaves the previous file whole and no temporary file
    behind, and the run is an internal error (exit 3), not its verdict with a warning."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    before = (dirs[0] / RESULT_FILE_NAME).read_bytes()

    def broken_replace(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    reporter.finish("VanishingGradient")
    assert reporter.close() == 3
    assert (dirs[0] / RESULT_FILE_NAME).read_bytes() == before
    assert list((dirs[0] / ".sagemaker-ignore").iterdir()) == []
    assert [e["event"] for e in logs].count("result_file_not_written") == 1


def test_temporary_files_stay_out_of_the_upload(dirs: tuple[Path, Path]) -> None:
    """The output folder holds only the result file; temporaries live in .sagemaker-ignore."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    reporter.finish("VanishingGradient")
    reporter.close()
    assert sorted(p.name for p in dirs[0].iterdir()) == [".sagemaker-ignore", RESULT_FILE_NAME]
    assert list((dirs[0] / ".sagemaker-ignore").iterdir()) == []


def test_unfinished_rule_is_an_internal_error(dirs: tuple[Path, Path]) -> None:
    """Closing with a rule that never ended reports our bug, exit 3; close is idempotent."""
    reporter = _reporter(dirs)
    reporter.start("VanishingGradient")
    assert reporter.close() == 3
    assert reporter.close() == 3
    assert (
        (dirs[1] / "message")
        .read_text()
        .startswith("InternalServerError: RuntimeError: the evaluation ended before rule")
    )


def test_progress_lines_are_rate_limited(
    dirs: tuple[Path, Path], logs: list[dict[str, Any]]
) -> None:
    """At most one progress line per interval, with the recent rate and the lag."""
    clock = FakeClock()
    reporter = _reporter(dirs, clock=clock, progress_interval=10.0)
    reporter.start("VanishingGradient")
    for step in range(25):  # two steps per second for 12.5 s
        clock.t += 0.5
        reporter.step_evaluated("VanishingGradient", step, newest_step=step + 3)
    lines = [e for e in logs if e["event"] == "rule_progress"]
    assert len(lines) == 1
    assert lines[0] == {
        "event": "rule_progress",
        "log_level": "info",
        "rule": "VanishingGradient",
        "step": 19,
        "steps_evaluated": 20,
        "steps_per_sec": 2.0,
        "lag_steps": 3,
    }


def test_console_progress_line(dirs: tuple[Path, Path], logs: list[dict[str, Any]]) -> None:
    """On a terminal one carriage-return line is redrawn instead of JSON progress lines."""
    clock, stream = FakeClock(), io.StringIO()
    reporter = _reporter(dirs, clock=clock, console=True, stream=stream, progress_interval=1.0)
    reporter.start("VanishingGradient")
    for step in range(20):
        clock.t += 0.05
        reporter.step_evaluated("VanishingGradient", step, newest_step=30)
    assert not [e for e in logs if e["event"] == "rule_progress"]
    drawn = [part for part in stream.getvalue().split("\r") if part.strip("\x1b[K")]
    assert 1 < len(drawn) <= 6  # 1 s of steps, redrawn at most every 0.2 s
    assert drawn[-1].startswith("VanishingGradient: step ") and "behind" in drawn[-1]
    reporter.finish("VanishingGradient")
    assert stream.getvalue().endswith("\r\x1b[K")  # cleared before the status line


def test_listeners_receive_status_events(
    dirs: tuple[Path, Path], logs: list[dict[str, Any]]
) -> None:
    """Status changes, firings and the end reach the listeners (firings and the end once the
    result file holds them); a failing listener changes nothing."""
    seen: list[dict[str, Any]] = []
    result = dirs[0] / "rule_evaluation_result.json"

    def broken(event: Any) -> None:
        raise RuntimeError("sink down")

    def record(event: Any) -> None:
        seen.append(dict(event))
        if event["event"] == "rule_fired":
            assert json.loads(result.read_text())["rules"][0]["fired_steps"] == [7]

    reporter = _reporter(dirs, listeners=[broken, record])
    reporter.start("VanishingGradient")
    reporter.fired("VanishingGradient", 7)
    reporter.finish("VanishingGradient")
    assert reporter.close() == 1
    assert [(e["event"], e.get("status")) for e in seen] == [
        ("rule_status", "InProgress"),
        ("rule_fired", None),
        ("rule_status", "IssuesFound"),
        ("evaluation_finished", None),
    ]
    assert seen[1]["result_file"] == seen[3]["result_file"] == str(result.absolute())
    assert seen[3]["exit_code"] == 1
    assert all(e["timestamp"].endswith("Z") for e in seen)
    assert [e["event"] for e in logs].count("status_listener_failed") == 4


def test_from_config(tmp_path: Path) -> None:
    """A reporter built from the configuration uses its rules and folders."""
    from evaluator.config import load_config

    (tmp_path / "t").mkdir()
    (tmp_path / "opt_ml" / "processing").mkdir(parents=True)  # as on SageMaker
    config = load_config(
        ["--trial-dir", str(tmp_path / "t"), "--rule", "A,B"],
        {},
        opt_ml_root=tmp_path / "opt_ml",
        stdout_is_tty=False,
    )
    reporter = StatusReporter.from_config(config, logger=structlog.get_logger())
    for name in ("A", "B"):
        reporter.start(name)
        reporter.finish(name)
    assert reporter.close() == 0
    doc = json.loads((config.output_dir / RESULT_FILE_NAME).read_text())
    assert [r["rule"] for r in doc["rules"]] == ["A", "B"]
    assert doc["trial"] == str(tmp_path / "t")


def test_the_result_file_is_rewritten_every_checkpoint_interval_while_steps_come(
    dirs: tuple[Path, Path],
) -> None:
    """While steps are judged the result file (the resume point) is rewritten at most every
    ``checkpoint_interval`` seconds (1 s by default)."""
    for interval, expected in ((1.0, 12), (5.0, 2)):
        clock = FakeClock()
        reporter = _reporter(dirs, clock=clock, checkpoint_interval=interval)
        reporter.start("VanishingGradient")
        result = dirs[0] / "rule_evaluation_result.json"
        writes = 0
        stamp = result.stat().st_mtime_ns, _result(dirs)["rules"][0].get("step")
        for step in range(25):  # two steps per second for 12.5 s
            clock.t += 0.5
            reporter.step_evaluated("VanishingGradient", step)
            now = result.stat().st_mtime_ns, _result(dirs)["rules"][0].get("step")
            writes += now != stamp
            stamp = now
        assert writes == expected, interval
        reporter.close()
