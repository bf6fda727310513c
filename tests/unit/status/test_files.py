"""The message files and the result file: skipped when they cannot be written, cut to SageMaker's
limit; the result document of a rule whose code raised."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evaluator.errors import BuiltinRuleError, ClientError, RuleCodeError
from evaluator.status.files import RuleRecord, result_document, write_status_files
from evaluator.status.outcome import RuleOutcome

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_message_folder_missing_is_skipped(tmp_path: Path) -> None:
    """Without /opt/ml/output (a local run) nothing is written and nothing fails."""
    assert not write_status_files(tmp_path / "absent", "ClientError: x")
    assert not (tmp_path / "absent").exists()


def test_message_folder_not_writable_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the process may not write to is skipped silently."""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert not write_status_files(tmp_path, "ClientError: x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_message_folder_is_skipped(tmp_path: Path) -> None:
    """A read-only folder is skipped silently."""
    tmp_path.chmod(0o555)
    try:
        assert not write_status_files(tmp_path, "ClientError: x")
    finally:
        tmp_path.chmod(0o755)


def test_failed_message_write_is_skipped(tmp_path: Path) -> None:
    """A write that fails (here: ``message`` is a folder) is skipped, leaving no temporaries."""
    (tmp_path / "message").mkdir()
    assert not write_status_files(tmp_path, "ClientError: x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["message"]


def test_message_files_are_cut_to_one_kilobyte(tmp_path: Path) -> None:
    """The files SageMaker reads hold at most 1024 bytes of valid UTF-8."""
    assert write_status_files(tmp_path, "ClientError: " + "é" * 2000)
    data = (tmp_path / "message").read_bytes()
    assert len(data) <= 1024 and data.decode("utf-8").startswith("ClientError: éé")


def _failed_record(error: BaseException) -> RuleRecord:
    record = RuleRecord("RatioRule", "ratio", {}, started_at=START, finished_at=START, last_step=3)
    record.outcome = RuleOutcome.from_error(record.name, error, step=record.last_step)
    return record


def _raise_and_wrap(wrap: type[RuleCodeError] | type[BuiltinRuleError]) -> BaseException:
    with pytest.raises(ZeroDivisionError) as caught:
        1 / 0  # noqa: B018
    return wrap("RatioRule", caught.value, step=3, location="my_rule.py, line 9")


def test_rule_code_error_document() -> None:
    """A user's rule that raised: exit 2, the rule's exception type, its traceback, the words."""
    doc = result_document(
        [_failed_record(_raise_and_wrap(RuleCodeError))],
        trial="t",
        started_at=START,
        finished_at=START,
        exit_code=2,
    )
    rule = doc["rules"][0]
    assert (rule["status"], rule["exit_code"], rule["error_type"]) == (
        "Error",
        2,
        "ZeroDivisionError",
    )
    assert (
        rule["details"]
        == doc["details"]
        == (
            "ClientError: rule RatioRule raised ZeroDivisionError: division by zero at step 3 "
            "(my_rule.py, line 9)"
        )
    )
    assert "1 / 0" in rule["traceback"] and "ZeroDivisionError" in rule["traceback"]
    assert (doc["status"], doc["message"], doc["started_at"]) == (
        "Error",
        rule["details"],
        "2024-05-01T12:00:00.000Z",
    )


def test_builtin_rule_error_document() -> None:
    """A built-in rule that raised is our bug: exit 3, InternalServerError, same words."""
    rule = result_document(
        [_failed_record(_raise_and_wrap(BuiltinRuleError))],
        trial="t",
        started_at=START,
        finished_at=START,
        exit_code=3,
    )["rules"][0]
    assert (rule["exit_code"], rule["error_type"]) == (3, "ZeroDivisionError")
    assert rule["details"].startswith(
        "InternalServerError: rule RatioRule raised ZeroDivisionError: division by zero at step 3"
    )


def test_checked_nothing_document() -> None:
    """A ClientError given smdebug's type name reports that name, without a traceback."""
    error = ClientError(
        "Insufficient information to invoke rule R: nothing matched",
        error_type="InsufficientInformationForRuleInvocation",
    )
    rule = result_document(
        [_failed_record(error)], trial=None, started_at=START, finished_at=None, exit_code=None
    )["rules"][0]
    assert (rule["exit_code"], rule["error_type"], rule["traceback"]) == (
        2,
        "InsufficientInformationForRuleInvocation",
        None,
    )
    assert rule["details"] == (
        "ClientError: Insufficient information to invoke rule R: nothing matched"
    )
