"""The last word on a run that could not say it itself.

The supervisor (``container.supervisor``) calls ``close_unfinished`` when the evaluation process
ended without reporting its verdict: stopped before it could write ``Stopped``, killed (out of
memory), ended by rule code, or ended because a rule overran its step time limit. The result
file keeps everything the run recorded (steps, firings, evidence); every rule still
``InProgress`` takes the given status, and the run its status, exit code and message. A result
file that already holds a verdict is left alone. Light imports only: the supervisor runs this
without loading the evaluator.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluator.status.files import RESULT_FILE_NAME, iso, write_result_file, write_status_files
from evaluator.status.outcome import truncate_utf8

__all__ = ["close_unfinished"]


def close_unfinished(
    result_dir: Path | None,
    message_dir: Path | None,
    *,
    status: str,
    exit_code: int,
    text: str,
    error_type: str | None = None,
    culprit: str | None = None,
    others_text: str | None = None,
) -> bool:
    """Write the final status of a run that ended without one: ``text`` in the message files
    (when the folder exists) and the result file (when one was started). When ``culprit`` names
    the rule that ended the run, the other unfinished rules get ``others_text`` as their details.
    Returns whether the result file was updated (False: there was none, it already held a
    verdict, or it could not be written)."""
    if message_dir is not None:
        write_status_files(message_dir, text)
    if result_dir is None:
        return False
    path = result_dir / RESULT_FILE_NAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(document, dict) or document.get("exit_code") is not None:
        return False
    found = document.get("rules")
    rules: list[Any] = found if isinstance(found, list) else []
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
        write_result_file(result_dir, document)
    except OSError:
        return False
    return True


def _now() -> str | None:
    return iso(datetime.now(UTC))
