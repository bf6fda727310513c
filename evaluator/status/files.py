"""What a run leaves behind: the message files SageMaker shows, and the result file.

**The message files** ``message`` and ``failure`` (in ``/opt/ml/output`` on SageMaker) hold the
combined message text (``outcome.combined_message``), written when the folder exists and is
writable; the text becomes the rule's StatusDetails.

**The result file** ``<output>/rule_evaluation_result.json`` is rewritten atomically (a temporary
file under ``<output>/.sagemaker-ignore/``, which SageMaker does not upload, then a rename) at
every status change, so a reader never sees half a file. Schema, version 1::

    {
      "version": 1,
      "status": "IssuesFound",          # overall: InProgress until the run ends
      "exit_code": 1,                   # null while in progress
      "message": "RuleEvaluationConditionMet: ...\\n",   # the message file's text, or null
      "trial": "s3://bucket/job/debug-output",
      "started_at": "2024-05-01T12:00:00.000Z", "finished_at": "...",  # UTC; null if running
      "run_key": "9f2c...",               # digest of trial, rules and parameters (resume.py)
      "resumed": {"VanishingGradient": 1200},  # resumed after these steps; null otherwise
      "data_problems": {           # event files whose steps were skipped (Trial.data_problems)
        "count": 1,                # all of them; "files" lists the first 100
        "files": [{"file": "s3://.../events/000000000120/000000000120_worker_0.tfevents",
                   "step": 120, "worker": "worker_0", "problem": "truncated",
                   "tensor": "...", "mode": "TRAIN", "detail": "...", "trial_complete": true}]
      },
      "rules": [{
        "rule": "VanishingGradient",            # rule_to_invoke
        "configuration_name": "VanishingGradient",
        "status": "IssuesFound", "exit_code": 1,
        "step": 500,               # first firing step; otherwise the last step evaluated
        "fired_steps": [500],      # every firing step (several with continue_after_fire)
                                   # steps are the writer's; where they are not the trial's
                                   # global steps (a TensorBoard run with phases) also
                                   # "step_mode": "EVAL", "fired_modes": ["EVAL"] and
                                   # "global_steps": {"step": 201, "fired_steps": [201]}
        "steps_evaluated": 12,
        "details": "RuleEvaluationConditionMet: ...\\n",   # StatusDetails text, or null
        "error_type": null,        # exception class name for Error
        "traceback": null,         # for exceptions other than our ClientError/InternalServerError
        "parameters": {"threshold": "0.0001"},           # secrets masked
        "evidence": {              # why: see below; null for a rule that was never built
          "tensors_checked": 3, "steps_checked": 12, "comparisons": 36,
          "tensor_values_read": 36, "tensors_read": 3, "firings": 1,
          "reasons": [{            # every firing comparison (the first 100)
            "step": 500, "mode": "TRAIN", "mode_step": 500, "worker": "worker_0",
            "tensors": ["gradients/dense/kernelGrad"], "quantity": "mean |gradient|",
            "value": 3.1e-09, "comparison": "<", "parameter": "threshold",
            "threshold": 1e-07, "sentence": "VanishingGradient: mean |gradient| of ..."}],
                                   # LossNotDecreasing, Overtraining and Overfit add
                                   # "diagnosis" (converged, not_learning, diverging,
                                   # oscillating, overfitting), "explanation",
                                   # "diagnosis_figures" and "note"
          "note_count": 3, "notes": [ ... ],  # only when the rule kept firings as notes
                                   # (ignore_converged): same fields as a reason
          "closest": [ ... ]       # per parameter and comparison, the check nearest to
        },                         # firing (or a firing one), same fields as a reason
        "error_after_firing": null,  # a storage/data error after the rule fired: the rule
                                     # keeps IssuesFound, the error is told here
        "started_at": "...", "finished_at": "..."
      }],
      # with exactly one rule, its rule, step, fired_steps, details, parameters and evidence
      # are also repeated here at the top level, so `jq .step` works on the common case
    }

Values that JSON cannot hold (NaN, infinities) are written as the strings "NaN", "Infinity"
and "-Infinity". A rule that compared nothing and read no tensor never ends ``NoIssuesFound``:
the evaluator ends it with ``Error`` (``InsufficientInformationForRuleInvocation``, exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from evaluator.errors import ClientError
from evaluator.fileio import UnsafeFile, read_capped, write_atomically, write_atomically_at
from evaluator.modes import WriterStep
from evaluator.status.outcome import (
    RuleOutcome,
    RuleStatus,
    combined_message,
    overall_status,
    truncate_utf8,
)

__all__ = [
    "RESULT_FILE_NAME",
    "EvidenceSource",
    "RuleRecord",
    "MAX_RESULT_FILE_BYTES",
    "ResultFileError",
    "iso",
    "read_result_file",
    "result_document",
    "rule_document",
    "write_result_file",
    "write_result_file_at",
    "write_status_files",
    "write_status_files_at",
]

RESULT_FILE_NAME = "rule_evaluation_result.json"
_IGNORED_DIR = ".sagemaker-ignore"  # SageMaker does not upload this folder of the output
MAX_RESULT_FILE_BYTES = 64 * 1024 * 1024
_MESSAGE_FILES = ("message", "failure")


class ResultFileError(ClientError):
    """A result file that cannot be taken: not a regular file, too large, not this evaluator's
    JSON document; the message names the file."""


def read_result_file(
    output_dir: Path | None = None, *, dir_fd: int | None = None
) -> dict[str, Any]:
    """The result document of ``output_dir`` (or of the folder ``dir_fd``), read with a size
    limit, never from a FIFO, device or symbolic link. Raises ``FileNotFoundError`` when there
    is none, ``ResultFileError`` (a ClientError naming the file) when it cannot be taken."""
    path = RESULT_FILE_NAME if output_dir is None else output_dir / RESULT_FILE_NAME
    shown = str(path) if output_dir is not None else RESULT_FILE_NAME
    try:
        data = read_capped(path, MAX_RESULT_FILE_BYTES, dir_fd=dir_fd, shown=shown)
    except UnsafeFile as e:
        raise ResultFileError(f"the result file {e}") from None
    except FileNotFoundError:
        raise
    except OSError as e:
        raise ResultFileError(
            f"the result file {shown} cannot be read: {e.strerror or e}"
        ) from None
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        reason = "it is nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise ResultFileError(f"the result file {shown} is not valid JSON: {reason}") from None
    if not isinstance(document, dict) or not isinstance(document.get("rules"), list):
        raise ResultFileError(
            f"the result file {shown} is not one this evaluator wrote (no list of rules)"
        )
    return document


def write_status_files_at(dir_fd: int, text: str) -> bool:
    """``write_status_files`` into the folder ``dir_fd`` (held open by the caller); nothing
    there is followed. Returns whether both files were written."""
    data = truncate_utf8(text).encode("utf-8", errors="backslashreplace")
    try:
        for name in _MESSAGE_FILES:
            write_atomically_at(dir_fd, name, data)
    except OSError:
        return False
    return True


def write_status_files(message_dir: Path, text: str) -> bool:
    """Write ``message`` and ``failure`` into ``message_dir`` when it exists and is writable;
    otherwise (a local run without /opt/ml) skip silently. Returns whether both were written."""
    if not message_dir.is_dir() or not os.access(message_dir, os.W_OK):
        return False
    data = truncate_utf8(text).encode("utf-8", errors="backslashreplace")
    try:
        for name in _MESSAGE_FILES:
            write_atomically(message_dir / name, data, tmp_dir=message_dir)
    except OSError:
        return False
    return True


class EvidenceSource(Protocol):
    """What a rule checked (``evaluator.rules.evidence.Evidence``)."""

    def summary(self) -> dict[str, Any]: ...

    def counts(self) -> dict[str, int]: ...


@dataclass
class RuleRecord:
    """What the result file says of one rule, kept up to date while the rule runs. ``name`` is
    the rule's, ``key`` its configuration name."""

    name: str
    key: str
    parameters: dict[str, str]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps_evaluated: int = 0
    last_step: int | None = None
    fired_steps: list[int] = field(default_factory=list)
    outcome: RuleOutcome | None = None
    evidence: EvidenceSource | None = None
    error_after_firing: str | None = None  # a read that failed once the rule had fired
    #: How a (global) step is shown: ``Trial.writer_step`` once the trial is open.
    shown: Callable[[int], WriterStep] = WriterStep

    def shown_step(self) -> WriterStep | None:
        """The rule's step (its first firing, else its last evaluated step) as shown."""
        step = self.outcome.step if self.outcome is not None else self.last_step
        return None if step is None else self.shown(step)

    def shown_fired(self) -> list[WriterStep]:
        return [self.shown(s) for s in self.fired_steps]

    @property
    def status(self) -> RuleStatus | None:
        if self.outcome is not None:
            return self.outcome.status
        return RuleStatus.IN_PROGRESS if self.started_at is not None else None


def iso(moment: datetime | None) -> str | None:
    """A UTC time as the result file writes it, milliseconds and ``Z``."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def rule_document(record: RuleRecord) -> dict[str, Any]:
    """One entry of the result file's ``rules``."""
    o = record.outcome
    step, fired = record.shown_step(), record.shown_fired()
    return {
        "rule": record.name,
        "configuration_name": record.key,
        "status": record.status.value if record.status else None,
        "exit_code": o.exit_code if o else None,
        "step": step.step if step is not None else None,
        "fired_steps": [f.step for f in fired],
        **_global_steps(record, step, fired),
        "steps_evaluated": record.steps_evaluated,
        "details": o.message if o else None,
        "error_type": o.error_type if o else None,
        "traceback": o.traceback if o else None,
        "parameters": record.parameters,
        "evidence": record.evidence.summary() if record.evidence is not None else None,
        "error_after_firing": record.error_after_firing,
        "started_at": iso(record.started_at),
        "finished_at": iso(record.finished_at),
    }


def _global_steps(
    record: RuleRecord, step: WriterStep | None, fired: list[WriterStep]
) -> dict[str, Any]:
    """For a trial whose global steps are not the writer's: the modes of ``step`` and
    ``fired_steps``, and the global steps behind them (what a resumed run goes on from)."""
    if all(s.mode is None for s in (step, *fired) if s is not None):
        return {}
    global_step = record.outcome.step if record.outcome is not None else record.last_step
    return {
        "step_mode": step.mode.name if step is not None and step.mode is not None else None,
        "fired_modes": [f.mode.name if f.mode is not None else None for f in fired],
        "global_steps": {"step": global_step, "fired_steps": list(record.fired_steps)},
    }


def result_document(
    records: Sequence[RuleRecord],
    *,
    trial: str | None,
    started_at: datetime,
    finished_at: datetime | None,
    exit_code: int | None,
    run_key: str | None = None,
    resumed: dict[str, int | None] | None = None,
    data_problems: tuple[int, list[dict[str, Any]]] = (0, []),
) -> dict[str, Any]:
    """The whole result file; the run is over once ``exit_code`` is known."""
    rules = [rule_document(r) for r in records]
    outcomes = [r.outcome for r in records if r.outcome is not None]
    done = exit_code is not None
    doc: dict[str, Any] = {
        "version": 1,
        "status": overall_status(outcomes).value if done else "InProgress",
        "exit_code": exit_code,
        "message": combined_message(outcomes) if done else None,
        "trial": trial,
        "started_at": iso(started_at),
        "finished_at": iso(finished_at),
        "run_key": run_key,
        "resumed": resumed,
        "data_problems": {"count": data_problems[0], "files": data_problems[1]},
        "rules": rules,
    }
    if len(rules) == 1:
        doc.update(
            {
                k: rules[0][k]
                for k in (
                    "rule",
                    "step",
                    "step_mode",
                    "fired_steps",
                    "fired_modes",
                    "details",
                    "parameters",
                    "evidence",
                )  # fmt: skip
                if k in rules[0]
            }
        )
    return doc


def write_result_file(output_dir: Path, document: dict[str, Any]) -> None:
    """Replace ``<output_dir>/rule_evaluation_result.json`` atomically; raises ``OSError``."""
    write_atomically(
        output_dir / RESULT_FILE_NAME, _encoded(document), tmp_dir=output_dir / _IGNORED_DIR
    )


def write_result_file_at(dir_fd: int, document: dict[str, Any]) -> None:
    """``write_result_file`` into the output folder ``dir_fd`` (held open by the caller): the
    temporary file goes to its ``.sagemaker-ignore`` when that is a real folder, else beside
    the result file; nothing is followed. Raises ``OSError``."""
    try:
        tmp_fd: int | None = os.open(
            _IGNORED_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        tmp_fd = None
    try:
        write_atomically_at(dir_fd, RESULT_FILE_NAME, _encoded(document), tmp_dir_fd=tmp_fd)
    finally:
        if tmp_fd is not None:
            os.close(tmp_fd)


def _encoded(document: dict[str, Any]) -> bytes:
    # ASCII escapes keep the file valid UTF-8 even when a path or value given on the command
    # line holds bytes that are not (they reach Python as lone surrogates).
    return json.dumps(document, indent=2, ensure_ascii=True).encode("ascii")
