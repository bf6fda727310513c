"""The run's verdict lines in the log, said by the supervisor: a ``rule_status`` per rule with
its final status and ``evaluation_finished``, from the result file read once every process of
the run is dead (after its last word: ``container.last_word``), with the exit code the
supervisor ends with. The evaluation, supervised, does not log them (rule code could have
forged them there: ``container.log_relay``). An ``info`` ``rule_status`` line is left out at
``--log-level WARNING`` and above, as the evaluator's own was; the verdict line never is.
"""

from __future__ import annotations

import os
from typing import Any

from container.output_lines import OutputLines

__all__ = ["say_verdict"]

_STATUS_OF_CODE = {0: "NoIssuesFound", 1: "IssuesFound", 2: "Error", 3: "Error"}


def say_verdict(
    lines: OutputLines, state: dict[str, Any], result_fd: int | None, code: int
) -> None:
    """Log the verdict lines of the run whose ``outputs`` message was ``state``; ``code``: the
    exit code the supervisor ends with."""
    document = _document(result_fd)
    rules = document.get("rules")
    entries = [e for e in rules if isinstance(e, dict)] if isinstance(rules, list) else []
    for entry in entries:
        fields = _rule_fields(entry)
        level = "error" if fields.get("status") == "Error" else "info"
        lines.log("rule_status", level, logger="evaluator.status", **fields)
    folder = state.get("result_dir") if isinstance(state.get("result_dir"), str) else None
    extra = {}
    if folder is not None and state.get("report") == "html":
        extra["report"] = os.path.join(folder, "rule_report.html")
    status = document.get("status")
    lines.log(
        "evaluation_finished",
        "info",
        logger="evaluator.verdict",
        always=True,
        status=status if isinstance(status, str) else _status_of(code),
        exit_code=code,
        rules={str(_key(e)): e.get("status") for e in entries},
        result_file=os.path.join(folder, "rule_evaluation_result.json") if folder else None,
        **extra,
    )


def _document(result_fd: int | None) -> dict[str, Any]:
    from evaluator.errors import ClientError
    from evaluator.status.files import read_result_file

    if result_fd is None:
        return {}
    try:
        return read_result_file(dir_fd=result_fd)
    except (OSError, ClientError):
        return {}


def _rule_fields(entry: dict[str, Any]) -> dict[str, Any]:
    fields = {
        "rule": _key(entry),
        "status": entry.get("status"),
        "step": entry.get("step"),
        "message": entry.get("details"),
        "steps_evaluated": entry.get("steps_evaluated"),
        "fired_steps": entry.get("fired_steps"),
        "exit_code": entry.get("exit_code"),
    }
    if entry.get("error_type"):
        fields["error_type"] = entry["error_type"]
    if entry.get("traceback"):
        fields["exception"] = entry["traceback"]
    return fields


def _key(entry: dict[str, Any]) -> Any:
    """The rule as the log names it: its configuration name (the result file's ``rule`` is
    the class's)."""
    return entry.get("configuration_name") or entry.get("rule")


def _status_of(code: int) -> str:
    return _STATUS_OF_CODE.get(code, "Stopped" if code in (130, 143) else "Error")
