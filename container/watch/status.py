"""What the watch shows: ``watch_status.json`` (every run: its rules, statuses, last step,
firing step, diagnosis, when it last changed) and ``index.html``, the batch's page
(``container.batch.summary``) over the same runs, both written whole (a reader never sees half
a file).

A run's entry is made from its result file, the last steps its log has named, and, when it
wrote no result, its process's exit code and last error line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from container.batch.job import REPORT_FILE_NAME, STILL_GOING, JobOutcome, outcome_from_result
from container.batch.summary import write_summary
from container.discovery import Held
from container.watch.live import WATCH_FOLDER
from evaluator.fileio import write_atomically
from evaluator.status.files import RESULT_FILE_NAME, iso

__all__ = ["STATUS_FILE", "RunEntry", "write_status"]

STATUS_FILE = "watch_status.json"


class RunEntry:
    """One run's line in the status file and the index; ``update`` says whether it changed."""

    def __init__(self, name: str, trial: str, *, title: str | None = None) -> None:
        self.name, self.trial, self.title = name, trial, title  # title: an MLflow run's name
        self.fields: dict[str, Any] = {**_fields(name, trial, None, {}, False), "report": None}
        self.updated_at = _now()
        self.outcome = JobOutcome(name=name, trial=trial, status="Starting", exit_code=STILL_GOING)
        self.held = False  # listed, not evaluated (yet): see ``hold``

    def update(
        self,
        document: Mapping[str, Any] | None,
        *,
        last_steps: Mapping[str, int],
        ended: bool,
        exit_code: int | None = None,
        message: str | None = None,
        output: Path,
    ) -> bool:
        fields = _fields(self.name, self.trial, document, last_steps, ended)
        if ended and (document is None or document.get("exit_code") is None):
            code = 3 if exit_code is None else exit_code
            fields.update(status="Stopped" if code in (130, 143) else "Error", exit_code=code)
            fields["message"] = message
        fields["report"] = (
            f"{self.name}/{REPORT_FILE_NAME}" if (output / REPORT_FILE_NAME).is_file() else None
        )
        if fields == self.fields:
            return False
        self.fields, self.updated_at = fields, _now()
        self.outcome = _outcome(self.name, self.trial, document, fields)
        return True

    def hold(self, held: Held) -> bool:
        """Listed with ``held``'s status and message, never evaluated until it is not held;
        whether the entry changed."""
        fields = {**_fields(self.name, self.trial, None, {}, False), "report": None}
        fields.update(status=held.status, message=held.message)
        self.held = True
        if fields == self.fields:
            return False
        self.fields, self.updated_at = fields, _now()
        self.outcome = JobOutcome(
            name=self.name,
            trial=self.trial,
            status=held.status,
            exit_code=STILL_GOING,
            message=held.message,
        )
        return True

    def queue(self) -> None:
        """Found, waiting for a place among the live runs (``--max-live``)."""
        self.fields["status"] = self.outcome.status = "Queued"

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.name, "run_name": self.title, **self.fields,
                "updated_at": iso(self.updated_at)}  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC)


def _fields(
    name: str,
    trial: str,
    document: Mapping[str, Any] | None,
    last_steps: Mapping[str, int],
    ended: bool,
) -> dict[str, Any]:
    rules = [_rule(r, last_steps) for r in _rule_entries(document)]
    fired = [r["fired_step"] for r in rules if r["fired_step"] is not None]
    steps = [r["last_step"] for r in rules if r["last_step"] is not None]
    first = min((r for r in rules if r["fired_step"] is not None), key=lambda r: r["fired_step"],
                default=None)  # fmt: skip
    return {
        "run": name,
        "trial": trial,
        "status": str(document.get("status")) if document else "Starting",
        "exit_code": document.get("exit_code") if document else None,
        "ended": ended,
        "last_step": max(steps, default=None),
        "fired_step": min(fired, default=None),
        "diagnosis": first["diagnosis"] if first else None,
        "message": (document.get("message") or None) if document else None,
        "rules": rules,
        "result_file": f"{name}/{RESULT_FILE_NAME}" if document else None,
    }


def _rule_entries(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    rules = (document or {}).get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def _rule(entry: Mapping[str, Any], last_steps: Mapping[str, int]) -> dict[str, Any]:
    key = entry.get("configuration_name") or entry.get("rule")
    fired = [s for s in entry.get("fired_steps") or [] if isinstance(s, int)]
    recorded = entry.get("step") if isinstance(entry.get("step"), int) else None
    seen = last_steps.get(str(key))
    known = [s for s in (recorded, seen) if s is not None]
    return {
        "rule": key,
        "status": entry.get("status"),
        "last_step": max(known, default=None),
        "fired_step": min(fired, default=None),
        "diagnosis": _diagnosis(entry) if fired else None,
    }


def _diagnosis(entry: Mapping[str, Any]) -> str | None:
    """The first firing's diagnosis, as the result file holds it."""
    evidence = entry.get("evidence")
    reasons = evidence.get("reasons") if isinstance(evidence, Mapping) else None
    if isinstance(reasons, list) and reasons and isinstance(reasons[0], Mapping):
        diagnosis = reasons[0].get("diagnosis")
        return diagnosis if isinstance(diagnosis, str) else None
    return None


def _outcome(
    name: str, trial: str, document: Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> JobOutcome:
    """The run as a row of the batch's page."""
    if document is not None and isinstance(document.get("exit_code"), int):
        outcome = outcome_from_result(name, trial, document)
    else:
        code = fields.get("exit_code")
        outcome = JobOutcome(
            name=name,
            trial=trial,
            status=str(fields["status"]),
            exit_code=code if isinstance(code, int) else STILL_GOING,
            message=fields.get("message"),
            step=fields.get("fired_step"),
        )
        if document is not None:
            outcome.rules = outcome_from_result(name, trial, document).rules
    outcome.report = fields.get("report")
    return outcome


def write_status(root: Path, entries: Iterable[RunEntry], *, shard: tuple[int, int]) -> None:
    """``watch_status.json`` and ``index.html`` (with the batch's ``batch_summary`` files)."""
    ordered = sorted(entries, key=lambda e: e.name)
    document = {
        "version": 1,
        "written_at": iso(_now()),
        "shard": f"{shard[0]}/{shard[1]}",
        "runs": [e.to_dict() for e in ordered],
    }
    write_atomically(
        root / STATUS_FILE,
        json.dumps(document, indent=1).encode(),
        tmp_dir=root / WATCH_FOLDER / "tmp",
    )
    write_summary(root, [replace(e.outcome, title=e.title) for e in ordered], engine="watch")
