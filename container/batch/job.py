"""One job of a batch: a single ``rule-evaluator`` run (the supervisor and its evaluation child,
as the command always runs), on one trial, into ``<output>/<trial name>/``.

The job's process writes exactly what a single run writes there (the result file, the rule
report); its log lines go to ``<output>/.batch/logs/<name>.log``, and what was asked, to
``<output>/.batch/jobs/<name>.json``. A job whose result file holds a verdict or a client error
(exit 0, 1 or 2) for the same request is finished: a batch run again keeps it. Anything else
(no result file, ``InProgress``, ``Stopped``, an internal error such as a killed process) runs
again, and the single run resumes from its result file where it can.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaluator.fileio import write_atomically
from evaluator.status.files import RESULT_FILE_NAME

__all__ = [
    "BATCH_FOLDER",
    "JobOutcome",
    "JobSpec",
    "finished_outcome",
    "outcome_from_result",
    "run_job",
]

BATCH_FOLDER = ".batch"
REPORT_FILE_NAME = "rule_report.html"
_FINISHED = (0, 1, 2)
_BOOT = "import sys; del sys.path[0]; from container.cli import main; sys.exit(main())"
_JOB_STOP_GRACE = "5"  # inside the batch's own supervisor's 8 s


@dataclass(frozen=True)
class JobSpec:
    """One job: its trial, its output folder's name, and the flags of its run."""

    name: str
    trial: str
    args: tuple[str, ...]  # the rules and their parameters, as for a single run

    def command(self, output_dir: str) -> list[str]:
        """The ``rule-evaluator`` command line of this job."""
        return [
            sys.executable,
            "-c",
            _BOOT,
            "--trial-dir",
            self.trial,
            "--output-dir",
            output_dir,
            "--log-format",
            "json",
            *self.args,
        ]

    def request(self) -> dict[str, Any]:
        return {"trial": self.trial, "args": list(self.args)}


@dataclass
class JobOutcome:
    """How one job ended, from its result file (or from its process, when it wrote none)."""

    name: str
    trial: str
    status: str
    exit_code: int
    message: str | None = None
    rules: list[dict[str, Any]] = field(default_factory=list)
    step: int | None = None
    seconds: float | None = None
    kept: bool = False  # finished in an earlier batch run, not run again
    report: str | None = None  # the rule report, relative to the batch's output folder
    result_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outcome_from_result(name: str, trial: str, document: Mapping[str, Any]) -> JobOutcome:
    """The summary of one result file."""
    rules = [
        {
            "rule": r.get("configuration_name") or r.get("rule"),
            "status": r.get("status"),
            "exit_code": r.get("exit_code"),
            "step": r.get("step"),
            "fired_steps": list(r.get("fired_steps") or []),
            "steps_evaluated": r.get("steps_evaluated"),
        }
        for r in _rule_entries(document)
    ]
    fired = [s for r in _rule_entries(document) for s in r.get("fired_steps") or []]
    exit_code = document.get("exit_code")
    return JobOutcome(
        name=name,
        trial=trial,
        status=str(document.get("status")),
        exit_code=int(exit_code) if isinstance(exit_code, int) else 3,
        message=(document.get("message") or None),
        rules=rules,
        step=min(fired) if fired else None,
        result_file=f"{name}/{RESULT_FILE_NAME}",
    )


def _rule_entries(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rules = document.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def _read_result(folder: Path) -> dict[str, Any] | None:
    try:
        document = json.loads((folder / RESULT_FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def finished_outcome(spec: JobSpec, root: Path, *, retry_errors: bool) -> JobOutcome | None:
    """The outcome of this job from an earlier batch run, when that run finished the same
    request (see the module docstring); None when the job must run."""
    try:
        asked = json.loads((root / BATCH_FOLDER / "jobs" / f"{spec.name}.json").read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(asked, dict)
        or {k: asked.get(k) for k in ("trial", "args")} != spec.request()
    ):
        return None
    document = _read_result(root / spec.name)
    if document is None or document.get("exit_code") not in _FINISHED:
        return None
    if retry_errors and document.get("exit_code") == 2:
        return None
    outcome = outcome_from_result(spec.name, spec.trial, document)
    outcome.kept = True
    seconds = asked.get("seconds")
    outcome.seconds = float(seconds) if isinstance(seconds, (int, float)) else None
    _add_report(outcome, root)
    return outcome


def _add_report(outcome: JobOutcome, root: Path) -> None:
    if (root / outcome.name / REPORT_FILE_NAME).is_file():
        outcome.report = f"{outcome.name}/{REPORT_FILE_NAME}"


def run_job(
    spec: JobSpec,
    root: Path,
    *,
    stopped: Callable[[], bool] = lambda: False,
    environ: Mapping[str, str] | None = None,
) -> JobOutcome:
    """Run the job to its end and return its outcome. When ``stopped()`` turns true the job
    gets SIGTERM (it ends ``Stopped``, as a single run does)."""
    batch = root / BATCH_FOLDER
    for sub in ("jobs", "logs", "opt_ml"):
        (batch / sub).mkdir(parents=True, exist_ok=True)
    write_atomically(
        batch / "jobs" / f"{spec.name}.json",
        json.dumps(spec.request(), indent=1).encode(),
        tmp_dir=batch / "jobs",
    )
    env = dict(os.environ if environ is None else environ)
    # Message files are per run: each job's would overwrite the others', so none is written
    # (a folder that does not exist); the processing config is the batch's, not the job's.
    env["EVALUATOR_OPT_ML"] = str(batch / "opt_ml" / spec.name)
    env.setdefault("EVALUATOR_STOP_GRACE", _JOB_STOP_GRACE)
    output = root / spec.name
    started = time.monotonic()
    with open(batch / "logs" / f"{spec.name}.log", "wb") as log:
        process = subprocess.Popen(
            spec.command(str(output)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        signalled = False
        try:
            while True:
                try:
                    code = process.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if stopped() and not signalled:
                        process.send_signal(signal.SIGTERM)
                        signalled = True
        finally:
            if process.poll() is None:  # interrupted here: never leave the job running
                process.send_signal(signal.SIGTERM)
                process.wait()
    seconds = time.monotonic() - started
    document = _read_result(output)
    if document is not None and document.get("exit_code") is not None:
        outcome = outcome_from_result(spec.name, spec.trial, document)
    else:  # the run wrote no verdict: its configuration failed, or it could not start
        outcome = JobOutcome(
            name=spec.name,
            trial=spec.trial,
            status="Stopped" if code in (130, 143) else "Error",
            exit_code=code,
            message=_last_error(batch / "logs" / f"{spec.name}.log"),
        )
    outcome.seconds = round(seconds, 3)
    _add_report(outcome, root)
    write_atomically(  # how long it took, for the summary of a later batch that keeps it
        batch / "jobs" / f"{spec.name}.json",
        json.dumps({**spec.request(), "seconds": outcome.seconds}, indent=1).encode(),
        tmp_dir=batch / "jobs",
    )
    return outcome


def _last_error(log: Path) -> str | None:
    """The last ``ClientError:`` / ``InternalServerError:`` line the job printed."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if text.startswith(("ClientError:", "InternalServerError:")):
            return text
    return lines[-1].strip() if lines else None
