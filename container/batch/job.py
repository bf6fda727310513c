"""One job of a batch: a single ``rule-evaluator`` run (the supervisor and its evaluation child,
as the command always runs), on one trial, into ``<output>/<trial name>/``.

The job's process writes exactly what a single run writes there (the result file, the rule
report); its log lines go to ``<output>/.batch/logs/<name>.log``, and what was asked, to
``<output>/.batch/jobs/<name>.json``. A job whose result file holds a verdict or a client error
(exit 0, 1 or 2) for the same request is finished: a batch run again keeps it. Anything else
(no result file, ``InProgress``, ``Stopped``, an internal error such as a killed process) runs
again, and the single run resumes from its result file where it can.

Every path comes from ``evaluator.config.output_paths.job_paths``. The outcome's exit code is
always one of the documented codes (0, 1, 2, 3, 130, 143): a job whose process was killed by a
signal (SIGKILL, the OOM killer) or ended with any other code is that job's ``Error`` (exit 3)
with a message saying so, and its result file is closed with it (it is never left
``InProgress``; rules keep a verdict they reached). The result file is taken only when the
process's exit code is the one it states: that is the file its supervisor confirmed.
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

from evaluator.config.output_paths import BATCH_FOLDER, JobPaths, job_paths
from evaluator.errors import ClientError
from evaluator.fileio import write_atomically
from evaluator.status.files import RESULT_FILE_NAME, read_result_file
from evaluator.status.final import close_result_at

__all__ = [
    "BATCH_FOLDER",
    "DOCUMENTED_CODES",
    "JobOutcome",
    "STILL_GOING",
    "JobSpec",
    "finished_outcome",
    "outcome_from_result",
    "run_job",
]

REPORT_FILE_NAME = "rule_report.html"
_FINISHED = (0, 1, 2)
DOCUMENTED_CODES = (0, 1, 2, 3, 130, 143)  # docs/container.md; anything else is reported as 3
STILL_GOING = -1  # the exit code of a job that has none yet (a watch's live run): not counted
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
        return [sys.executable, "-c", _BOOT, *self.arguments(output_dir)]

    def arguments(self, output_dir: str) -> list[str]:
        """The arguments of ``rule-evaluator`` for this job."""
        return ["--trial-dir", self.trial, "--output-dir", output_dir, "--log-format", "json"] + [
            *self.args
        ]

    def request(self) -> dict[str, Any]:
        return {"trial": self.trial, "args": list(self.args)}


@dataclass
class JobOutcome:
    """How one job ended, from its result file (or from its process, when it wrote none);
    ``exit_code`` is ``STILL_GOING`` for a job that has not ended (a watch's live run)."""

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
    title: str | None = None  # what the run's writer calls it, when not its name (MLflow's)

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
        exit_code=exit_code if type(exit_code) is int and exit_code in DOCUMENTED_CODES else 3,
        message=(document.get("message") or None),
        rules=rules,
        step=min(fired) if fired else None,
        result_file=f"{name}/{RESULT_FILE_NAME}",
    )


def _rule_entries(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rules = document.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def _read_result(folder: Path) -> dict[str, Any] | None:
    """The result document in ``folder`` (size-limited, never a FIFO or link); None when there
    is none or it cannot be taken."""
    try:
        return read_result_file(folder)
    except (OSError, ClientError):
        return None


def finished_outcome(spec: JobSpec, root: Path, *, retry_errors: bool) -> JobOutcome | None:
    """The outcome of this job from an earlier batch run, when that run finished the same
    request (see the module docstring); None when the job must run."""
    paths = job_paths(root, spec.name)
    try:
        asked = json.loads(paths.request.read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(asked, dict)
        or {k: asked.get(k) for k in ("trial", "args")} != spec.request()
    ):
        return None
    document = _read_result(paths.output)
    if document is None or document.get("exit_code") not in _FINISHED:
        return None
    if retry_errors and document.get("exit_code") == 2:
        return None
    outcome = outcome_from_result(spec.name, spec.trial, document)
    outcome.kept = True
    seconds = asked.get("seconds")
    outcome.seconds = float(seconds) if isinstance(seconds, (int, float)) else None
    _add_report(outcome, paths)
    return outcome


def _add_report(outcome: JobOutcome, paths: JobPaths) -> None:
    if (paths.output / REPORT_FILE_NAME).is_file():
        outcome.report = paths.report


def run_job(
    spec: JobSpec,
    root: Path,
    *,
    stopped: Callable[[], bool] = lambda: False,
    environ: Mapping[str, str] | None = None,
) -> JobOutcome:
    """Run the job to its end and return its outcome. When ``stopped()`` turns true the job
    gets SIGTERM (it ends ``Stopped``, as a single run does)."""
    paths = job_paths(root, spec.name)
    for folder in (paths.request.parent, paths.log.parent, paths.opt_ml.parent):
        folder.mkdir(parents=True, exist_ok=True)
    _write_request(paths, spec, seconds=None)
    env = dict(os.environ if environ is None else environ)
    # Message files are per run: each job's would overwrite the others', so none is written
    # (a folder that does not exist); the processing config is the batch's, not the job's.
    env["EVALUATOR_OPT_ML"] = str(paths.opt_ml)
    env.setdefault("EVALUATOR_STOP_GRACE", _JOB_STOP_GRACE)
    started = time.monotonic()
    code = _run_process(spec.command(str(paths.output)), paths.log, env, stopped)
    outcome = _outcome(spec, paths, code)
    outcome.seconds = round(time.monotonic() - started, 3)
    _add_report(outcome, paths)
    _write_request(paths, spec, seconds=outcome.seconds)  # for a later batch that keeps it
    return outcome


def _write_request(paths: JobPaths, spec: JobSpec, *, seconds: float | None) -> None:
    request = spec.request() if seconds is None else {**spec.request(), "seconds": seconds}
    data = json.dumps(request, indent=1).encode()
    write_atomically(paths.request, data, tmp_dir=paths.request.parent)


def _run_process(
    command: list[str], log_path: Path, env: dict[str, str], stopped: Callable[[], bool]
) -> int:
    """The job's process to its end, its output in ``log_path``; its return code (negative:
    the signal that killed it)."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        signalled = False
        try:
            while True:
                try:
                    return process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    if stopped() and not signalled:
                        process.send_signal(signal.SIGTERM)
                        signalled = True
        finally:
            if process.poll() is None:  # interrupted here: never leave the job running
                process.send_signal(signal.SIGTERM)
                process.wait()


def _outcome(spec: JobSpec, paths: JobPaths, code: int) -> JobOutcome:
    """The job's outcome from its result file when its supervisor confirmed it (the process's
    exit code is the one the file states); else from how the process ended."""
    if code in (-signal.SIGTERM, -signal.SIGINT):  # before its handlers were in: a shell's code
        code = 128 - code
    document = _read_result(paths.output)
    if document is not None and document.get("exit_code") == code:
        return outcome_from_result(spec.name, spec.trial, document)
    if code not in (2, 3, 130, 143):  # killed, or a verdict its supervisor did not confirm
        return _died(spec, paths, code)
    return JobOutcome(  # the run wrote no verdict: its configuration failed, or it could not start
        name=spec.name,
        trial=spec.trial,
        status="Stopped" if code in (130, 143) else "Error",
        exit_code=code,
        message=_last_error(paths.log)
        or f"this job's rule-evaluator process exited with code {code}; its log: "
        f"{BATCH_FOLDER}/logs/{paths.log.name}",
    )


def _died(spec: JobSpec, paths: JobPaths, code: int) -> JobOutcome:
    """A job whose process was killed, or ended with an undocumented code: its ``Error``
    (exit 3), also in its result file when it wrote one."""
    if code < 0:
        name = _signal_name(-code)
        why = f"was killed by {name}" + (
            " (the machine may have run out of memory)" if -code == signal.SIGKILL else ""
        )
    else:
        why = f"ended with exit code {code} and no result file stating it"
    text = (
        f"InternalServerError: this job's rule-evaluator process {why} before it confirmed a "
        f"verdict; it runs again (and resumes) in the next batch. Its log: "
        f"{BATCH_FOLDER}/logs/{paths.log.name}"
    )
    _close_result(paths.output, text)
    return JobOutcome(name=spec.name, trial=spec.trial, status="Error", exit_code=3, message=text)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _close_result(folder: Path, text: str) -> None:
    """Close the job's result file as an internal error (rules keep a verdict they reached);
    one saying only that when the run wrote none, as long as its folder exists."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        close_result_at(fd, status="Error", exit_code=3, text=text, force=True)
    finally:
        os.close(fd)


def _last_error(log: Path) -> str | None:
    """The last ``ClientError:`` / ``InternalServerError:`` line the job printed, or None."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if text.startswith(("ClientError:", "InternalServerError:")):
            return text
    return None
