"""configure_logging: JSON lines on one stream, stdlib routed through it, AWS loggers clamped."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from evaluator.config import RuleSpec
from evaluator.errors import ConfigurationError
from evaluator.reporting import StatusReporter
from evaluator.status import configure_logging

CLAMPED = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Put the process-wide logging configuration back after each test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in (*CLAMPED, "botocore.endpoint")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_status_lines_are_json(tmp_path: Path) -> None:
    """Every line is one JSON object; status lines carry rule, status, step, message, time."""
    stream = io.StringIO()
    configure_logging(stream=stream)
    reporter = StatusReporter(
        [RuleSpec(name="Overfit", configuration_name="Overfit")],
        output_dir=tmp_path,
        message_dir=None,
    )
    reporter.start("Overfit")
    reporter.fired("Overfit", 7200)
    reporter.finish("Overfit")
    reporter.close()
    lines = _lines(stream)
    status = [line for line in lines if line["event"] == "rule_status"]
    assert [(s["rule"], s["status"], s["step"]) for s in status] == [
        ("Overfit", "InProgress", None),
        ("Overfit", "IssuesFound", 7200),
    ]
    assert status[1]["message"].startswith(
        "RuleEvaluationConditionMet: Evaluation of the rule Overfit at step 7200"
    )
    assert all(line["timestamp"].endswith("Z") and line["level"] for line in lines)
    assert lines[-1]["event"] == "evaluation_finished" and lines[-1]["exit_code"] == 1


def test_error_line_has_the_traceback_as_json(tmp_path: Path) -> None:
    """An exception from rule code is rendered into the JSON line, which still parses."""
    stream = io.StringIO()
    configure_logging(stream=stream)
    reporter = StatusReporter(["R"], output_dir=None, message_dir=None)
    reporter.start("R")
    try:
        {}["missing"]
    except KeyError as e:
        reporter.fail("R", e, client=True)
    reporter.fail("R", ConfigurationError("ignored: already ended"))
    [error] = [line for line in _lines(stream) if line.get("status") == "Error"]
    assert error["level"] == "error" and "KeyError" in error["exception"]


def test_stdlib_logging_is_routed(tmp_path: Path) -> None:
    """Records from stdlib loggers (the trial reader's) come out as the same JSON lines."""
    stream = io.StringIO()
    configure_logging(stream=stream)
    logging.getLogger("evaluator.trial").warning("waiting for %s", "collections")
    [line] = _lines(stream)
    assert (line["event"], line["level"], line["logger"]) == (
        "waiting for collections",
        "warning",
        "evaluator.trial",
    )


def test_aws_loggers_stay_at_info_under_debug() -> None:
    """At DEBUG our own lines appear but botocore & co. stay at INFO, even when a child
    logger is later turned down to DEBUG (botocore prints credentials at DEBUG)."""
    stream = io.StringIO()
    configure_logging(level="DEBUG", stream=stream)
    for name in CLAMPED:
        assert logging.getLogger(name).getEffectiveLevel() == logging.INFO
    logging.getLogger("botocore.endpoint").setLevel(logging.DEBUG)
    logging.getLogger("botocore.endpoint").debug("Authorization: AWS4-HMAC-SHA256 secret")
    logging.getLogger("urllib3.connectionpool").debug("Starting new HTTPS connection")
    logging.getLogger("botocore.credentials").info("Found credentials in environment variables.")
    structlog.get_logger("evaluator.trial").debug("polled", new_keys=0)
    events = [line["event"] for line in _lines(stream)]
    assert events == ["Found credentials in environment variables.", "polled"]


def test_quieter_levels_are_kept_for_aws_loggers() -> None:
    """A level above INFO applies to the AWS loggers too."""
    configure_logging(level="ERROR", stream=io.StringIO())
    assert logging.getLogger("botocore").level == logging.ERROR


def test_reconfiguring_replaces_the_handler() -> None:
    """A second call replaces the first handler instead of doubling every line."""
    first, second = io.StringIO(), io.StringIO()
    configure_logging(stream=first)
    configure_logging(stream=second)
    logging.getLogger("x").warning("once")
    assert first.getvalue() == "" and len(second.getvalue().splitlines()) == 1


def test_console_format() -> None:
    """The console format prints readable lines rather than JSON."""
    stream = io.StringIO()
    configure_logging(log_format="console", stream=stream)
    structlog.get_logger("evaluator.status").info("rule_status", rule="R", status="InProgress")
    text = stream.getvalue()
    assert "rule_status" in text and "status=InProgress" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_unknown_level_is_refused() -> None:
    """A level name logging does not know is an error, not a silent default."""
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging(level="LOUD", stream=io.StringIO())


def test_asked_again_for_the_same_settings_the_handler_stays() -> None:
    """The runs of a shared worker each configure logging: the same level, format and
    stream keep the installed handler (no moment without one); another stream or level
    replaces it, once."""
    stream = io.StringIO()
    first = configure_logging(level="INFO", stream=stream)
    assert configure_logging(level="INFO", stream=stream) is first
    other = configure_logging(level="WARNING", stream=stream)
    assert other is not first
    handlers = [h for h in logging.getLogger().handlers if h.get_name() == "evaluator"]
    assert handlers == [other]
    assert configure_logging(level="WARNING", stream=io.StringIO()) is not other
