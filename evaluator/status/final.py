"""The last word on a run, said by the supervisor (``container.supervisor``) once every process
of the evaluation has ended, so nothing can rewrite it afterwards.

Rule code runs in the evaluation process, so nothing that process says is taken on trust once
rule code may have run. The supervisor takes the run's outcome from the result file alone:
``confirm`` accepts a finished document whose exit code and status are the ones its rules'
statuses give (``outcome.overall_exit_code``) and writes the message files from it. Otherwise,
and after a stop or a step time-out whatever the file says, ``close_unfinished`` writes the
final status: the result file keeps everything the run recorded (steps, firings, evidence);
every rule still ``InProgress`` takes the given status, and the run its status, exit code and
message. Every file is read with a size limit, never from a FIFO, device or symbolic link, and
written relative to folders the supervisor opened before rule code could run. Light imports
only: the supervisor runs this without loading the evaluator.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from evaluator.errors import ClientError
from evaluator.status.files import (
    iso,
    read_result_file,
    write_result_file_at,
    write_status_files_at,
)
from evaluator.status.outcome import (
    RuleOutcome,
    RuleStatus,
    overall_exit_code,
    overall_status,
    truncate_utf8,
)

__all__ = ["close_result_at", "close_unfinished", "confirm", "verified_exit_code"]

_CODES: dict[str, tuple[int, ...]] = {
    RuleStatus.NO_ISSUES_FOUND.value: (0,),
    RuleStatus.ISSUES_FOUND.value: (1,),
    RuleStatus.ERROR.value: (2, 3),
}


def verified_exit_code(document: dict[str, Any]) -> tuple[int | None, str]:
    """The exit code a finished result document states, when its status and exit code are the
    ones its rules' statuses give; else None and why not. ``Stopped`` is never taken from a
    file: only the supervisor knows whether a stop came."""
    rules = document.get("rules")
    if not isinstance(rules, list) or not rules:
        return None, "it lists no rule"
    outcomes = []
    for entry in rules:
        if not isinstance(entry, dict):
            return None, "a rule entry is not an object"
        status, code = entry.get("status"), entry.get("exit_code")
        if not isinstance(status, str) or status not in _CODES:
            return None, f"rule status {str(status)[:40]!r} is not a verdict"
        if type(code) is not int or code not in _CODES[status]:
            return None, f"rule exit code {str(code)[:40]!r} does not match status {status}"
        outcomes.append(RuleOutcome(str(entry.get("rule")), RuleStatus(status), code))
    code, status = document.get("exit_code"), document.get("status")
    expected = overall_exit_code(outcomes)
    if type(code) is not int or code != expected or status != overall_status(outcomes).value:
        return None, (
            f"its exit code {str(code)[:40]!r} and status {str(status)[:40]!r} are not the "
            f"ones its rules give ({expected})"
        )
    if not isinstance(document.get("message"), str | None):
        return None, "its message is not text"
    return code, ""


def confirm(result_fd: int | None, message_fd: int | None) -> tuple[int | None, str]:
    """The run's exit code from its result file, with the message files written from it; or
    None and why the file cannot be taken (the caller then closes the run)."""
    if result_fd is None:
        return None, "there is no output folder"
    try:
        document = read_result_file(dir_fd=result_fd)
    except FileNotFoundError:
        return None, "the evaluation wrote no result file"
    except ClientError as e:
        return None, str(e)
    code, why = verified_exit_code(document)
    if code is None:
        return None, f"the result file cannot be taken: {why}"
    message = document.get("message")
    if message_fd is not None and isinstance(message, str) and message:
        write_status_files_at(message_fd, message)
    return code, ""


def close_unfinished(
    result_fd: int | None,
    message_fd: int | None,
    *,
    status: str,
    exit_code: int,
    text: str,
    error_type: str | None = None,
    culprit: str | None = None,
    others_text: str | None = None,
    force: bool = False,
) -> bool:
    """Write the final status of a run: ``text`` in the message files (when the folder was
    opened) and the result file (``close_result_at``, when there is an output folder).
    Returns whether the result file was written."""
    if message_fd is not None:
        write_status_files_at(message_fd, text)
    if result_fd is None:
        return False
    return close_result_at(
        result_fd,
        status=status,
        exit_code=exit_code,
        text=text,
        error_type=error_type,
        culprit=culprit,
        others_text=others_text,
        force=force,
    )


def close_result_at(
    result_fd: int,
    *,
    status: str,
    exit_code: int,
    text: str,
    error_type: str | None = None,
    culprit: str | None = None,
    others_text: str | None = None,
    force: bool = False,
) -> bool:
    """Close the result file in the folder ``result_fd`` with the run's final status. With
    ``force`` (a stop, a time-out, a file that cannot be taken) a result file that already
    holds a verdict is overwritten at the run level (each rule keeps a verdict it reached);
    without, it is left alone. A file that cannot be read is replaced by one saying only this.
    When ``culprit`` names the rule that ended the run, the other unfinished rules get
    ``others_text``. Returns whether the result file was written."""
    try:
        document = read_result_file(dir_fd=result_fd)
    except (OSError, ClientError):
        document = {"version": 1, "rules": [], "started_at": None}
    if document.get("exit_code") is not None and not force:
        return False
    rules: list[Any] = document["rules"]
    for rule in rules:
        if not isinstance(rule, dict) or rule.get("status") not in (None, "InProgress"):
            continue
        bystander = culprit is not None and rule.get("configuration_name") != culprit
        rule.update(
            status=status,
            exit_code=exit_code,
            details=truncate_utf8(others_text if bystander and others_text else text),
            error_type=error_type,
            finished_at=_now(),
        )
    document.update(status=status, exit_code=exit_code, message=text, finished_at=_now())
    if len(rules) == 1 and isinstance(rules[0], dict):
        document["details"] = rules[0].get("details")
    try:
        write_result_file_at(result_fd, document)
    except OSError:
        return False
    return True


def _now() -> str | None:
    return iso(datetime.now(UTC))
