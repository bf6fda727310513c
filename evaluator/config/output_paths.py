"""Where outputs named after the data go: the one place that turns a name (a trial's, a job's)
into a path under an output folder, so that no name puts a file outside that folder or over
the batch's own files.

* ``safe_name(text)`` rewrites any text into one folder name: characters other than letters,
  digits, ``.``, ``_`` and ``-`` become ``_``; an empty name becomes ``trial``; a name of dots
  only (``.``, ``..``) or a reserved name (``RESERVED_NAMES``, compared without case, as a
  case-insensitive file system would) gets a leading ``_`` (``_..``, ``_index.html``).
* ``output_path(root, name)`` is ``root/name`` for a name that is its own ``safe_name``; any
  other name is a ``ConfigurationError`` (names are made safe where they are chosen,
  ``evaluator.config.trial_list.trial_names``; this is the check at the point of writing).
* ``job_paths(root, name)``: every path of one batch job (its run's folder, and its request,
  log and message folder under ``.batch/``).
* ``file_inside(folder, relative)``: a ``/``-separated relative path (a file a Ray task sent
  back) under ``folder``; ``..``, ``.``, empty and absolute parts are a ``ConfigurationError``.

Reserved are the entries a batch writes at the top of its ``--output-dir`` and those a single
run writes at the top of its own (a job's folder must never be one of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evaluator.errors import ConfigurationError

__all__ = [
    "BATCH_FOLDER",
    "RESERVED_NAMES",
    "SUMMARY_CSV",
    "SUMMARY_JSON",
    "SUMMARY_PAGE",
    "JobPaths",
    "file_inside",
    "job_paths",
    "output_path",
    "safe_name",
]

BATCH_FOLDER = ".batch"  # the batch's own files: job requests, logs, temporary files
SUMMARY_JSON = "batch_summary.json"
SUMMARY_CSV = "batch_summary.csv"
SUMMARY_PAGE = "index.html"
# What a single run writes at the top of its output folder (evaluator.status.files,
# evaluator.report; tests/unit/config/test_output_paths.py checks they agree).
RUN_FILES = (
    "rule_evaluation_result.json",
    "rule_report.html",
    "rule_report_data.json",
    ".sagemaker-ignore",
)
RESERVED_NAMES = frozenset(
    n.lower() for n in (BATCH_FOLDER, SUMMARY_JSON, SUMMARY_CSV, SUMMARY_PAGE, *RUN_FILES)
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """One folder name for ``text`` (see the module docstring); the same text, the same name."""
    name = _UNSAFE.sub("_", text) or "trial"
    if name.strip(".") == "" or name.lower() in RESERVED_NAMES:
        name = "_" + name
    return name


def output_path(root: Path, name: str) -> Path:
    """``root/name``; a ``ConfigurationError`` when ``name`` is not a safe folder name."""
    if not name or safe_name(name) != name:
        raise ConfigurationError(
            f"{name!r} cannot name an output folder: it is empty, reserved, all dots, or has "
            "characters other than letters, digits, '.', '_' and '-'"
        )
    return root / name


@dataclass(frozen=True)
class JobPaths:
    """Every path one job of a batch writes."""

    output: Path  # <root>/<name>/: the job's single run writes here
    request: Path  # <root>/.batch/jobs/<name>.json: what was asked, and how long it took
    log: Path  # <root>/.batch/logs/<name>.log: the run's log lines
    opt_ml: Path  # <root>/.batch/opt_ml/<name>: message files, never written (see job.py)
    report: str  # the run's report, relative to <root>, for the summary's link


def job_paths(root: Path, name: str) -> JobPaths:
    """The paths of the job ``name`` under the batch's output folder ``root``."""
    output = output_path(root, name)
    batch = root / BATCH_FOLDER
    return JobPaths(
        output=output,
        request=batch / "jobs" / f"{name}.json",
        log=batch / "logs" / f"{name}.log",
        opt_ml=batch / "opt_ml" / name,
        report=f"{name}/rule_report.html",
    )


def file_inside(folder: Path, relative: str) -> Path:
    """``folder`` joined with the ``/``-separated ``relative``; a ``ConfigurationError`` for a
    path that could leave it."""
    parts = relative.split("/")
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise ConfigurationError(
            f"{relative!r} is not a file inside {folder}: it is empty, absolute, or has a "
            "'.', '..' or empty part"
        )
    return folder.joinpath(*parts)
