"""Resuming a run that ended without its verdict: killed (SIGKILL, the OOM killer, a spot
interruption, a pod restart) or stopped.

The result file is the run's record of progress: per rule its status, last evaluated step,
firing steps and step count, rewritten at every firing and status change, and, at the top,
``run_key``, a digest of what was asked (the trial, and each rule's name, configuration name,
code location, step window and parameters; secret values leave the digest as they leave the
file). A new run with the same output folder and the same ``run_key`` resumes when the earlier
one did not finish: its status was ``InProgress`` or ``Stopped``, or it ended in an internal
error (exit 3, a killed child). Then

* a rule that had reached a verdict (NoIssuesFound, IssuesFound, or a ClientError) keeps it
  and is not run again;
* every other rule is built afresh and replays the steps up to its last evaluated one from
  the trial, quietly (rules that keep history, such as LossNotDecreasing, rebuild it; firings
  there are the ones already recorded), then goes on from there as any run does.

A result file of another run (another trial, rules or parameters), or of a finished run, is
replaced as before, with a log line saying why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.status.files import RESULT_FILE_NAME, ResultFileError, read_result_file
from evaluator.status.outcome import RuleOutcome, RuleStatus

__all__ = ["RecordedEvidence", "Resume", "RuleProgress", "previous_run", "run_key"]

_UNFINISHED_RUN_CODES = (3, 130, 143)  # internal error (a killed child), SIGINT, SIGTERM
_VERDICTS = ("NoIssuesFound", "IssuesFound")


@dataclass(frozen=True)
class RuleProgress:
    """What an earlier attempt recorded of one rule."""

    key: str
    last_step: int | None
    fired_steps: tuple[int, ...]
    steps_evaluated: int
    outcome: RuleOutcome | None  # a verdict that stands; None: the rule goes on
    evidence: RecordedEvidence | None = None  # what the earlier attempt checked, for a verdict


class RecordedEvidence:
    """The ``evidence`` an earlier attempt wrote for a verdict that stands, shown as it was."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self._summary = summary

    def summary(self) -> dict[str, Any]:
        return dict(self._summary)

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in self._summary.items() if isinstance(v, int)}


@dataclass(frozen=True)
class Resume:
    """An earlier attempt to resume: its rules' progress, by configuration name."""

    rules: Mapping[str, RuleProgress]
    started_at: str | None

    def steps(self) -> dict[str, int | None]:
        """The last evaluated step of every rule that goes on (for the log)."""
        return {k: p.last_step for k, p in self.rules.items() if p.outcome is None}


def run_key(trial: str, rules: Sequence[Any]) -> str:
    """The digest of what a run was asked: ``trial`` and the rules' specs (``RuleSpec``)."""
    described = [
        {
            "name": r.name,
            "configuration_name": r.configuration_name,
            "source": r.source,
            "start_step": r.start_step,
            "end_step": r.end_step,
            "parameters": sorted(r.redacted_parameters().items()),
        }
        for r in rules
    ]
    text = json.dumps({"trial": trial, "rules": described}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def previous_run(output_dir: Path, key: str) -> tuple[Resume | None, str | None]:
    """The earlier attempt to resume, or None and why not (None, None: there was none).
    Raises ``ResultFileError`` (a ClientError naming the file) when the result file there is
    not a regular file within the size limit, not JSON, or, for this run, holds fields of the
    wrong type."""
    try:
        document = read_result_file(output_dir)
    except FileNotFoundError:
        return None, None
    if document.get("run_key") != key:
        return None, "the earlier run had another trial, rules or parameters"
    shown = output_dir / RESULT_FILE_NAME
    code = _field(document, "exit_code", int, shown)
    if code is not None and code not in _UNFINISHED_RUN_CODES:
        return None, f"the earlier run finished ({document.get('status')}, exit {code})"
    rules = {}
    for entry in document["rules"]:
        progress = _progress(entry, shown)
        rules[progress.key] = progress
    return Resume(rules, _field(document, "started_at", str, shown)), None


def _field(entry: dict[str, Any], name: str, kind: type, shown: Path) -> Any:
    """``entry[name]`` when it is None or a ``kind``; else the file is refused."""
    value = entry.get(name)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise ResultFileError(
        f"the result file {shown} is not one this evaluator wrote: {name} is "
        f"{_shown(value)}, not {'a number' if kind is int else 'a ' + kind.__name__}; remove it "
        "or choose another output folder"
    )


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str | int | float) else type(value).__name__
    return text[:60]


def _progress(entry: Any, shown: Path) -> RuleProgress:
    if not isinstance(entry, dict) or not isinstance(entry.get("configuration_name"), str):
        raise ResultFileError(
            f"the result file {shown} is not one this evaluator wrote: a rule entry has no "
            "configuration_name; remove it or choose another output folder"
        )
    # The trial's own steps: "global_steps" where they are not the writer's (files.py).
    found = entry.get("global_steps")
    steps: dict[str, Any] = found if isinstance(found, dict) else entry
    fired_list = _field(steps, "fired_steps", list, shown) or []
    fired = tuple(s for s in fired_list if isinstance(s, int) and not isinstance(s, bool))
    step = _field(steps, "step", int, shown)
    status = _field(entry, "status", str, shown)
    code = _field(entry, "exit_code", int, shown)
    details = _field(entry, "details", str, shown)
    error_type = _field(entry, "error_type", str, shown)
    trace = _field(entry, "traceback", str, shown)
    evidence = _field(entry, "evidence", dict, shown)
    evaluated = _field(entry, "steps_evaluated", int, shown)
    outcome = None
    if status in _VERDICTS or (status == "Error" and code == 2):
        outcome = RuleOutcome(
            str(entry.get("rule")),
            RuleStatus(status),
            int(code or 0),
            step,
            fired,
            details,
            error_type,
            trace,
        )
    # While a rule runs, "step" is its last evaluated step; after a firing the last
    # evaluated step is at least the last firing.
    last = step
    if fired:
        last = max(fired[-1], last if last is not None else fired[-1])
    return RuleProgress(
        entry["configuration_name"],
        last,
        fired,
        evaluated or 0,
        outcome,
        RecordedEvidence(evidence) if outcome is not None and evidence is not None else None,
    )
