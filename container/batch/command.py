"""The ``batch`` subcommand: find the trials, keep the jobs an earlier run finished, run the
others on the chosen engine, print a line per finished job and the table, write the summary,
and exit with the worst outcome (``container.batch.request.USAGE``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TextIO

from container.batch.engines import default_jobs, run_on_pool, run_on_ray
from container.batch.job import JobOutcome, JobSpec, finished_outcome
from container.batch.request import USAGE, BatchRequest, parse_request
from container.batch.summary import SUMMARY_PAGE, format_table, worst_exit_code, write_summary
from container.batch.trials import Trial, find_trials
from evaluator.errors import ConfigurationError, ExitCode

__all__ = ["main"]


class _Stop(Protocol):
    """The stop signal's state, as ``container.signals.StopSignals`` keeps it."""

    stop: threading.Event
    signum: int | None


def main(argv: Sequence[str], *, signals: _Stop | None = None, out: TextIO | None = None) -> int:
    """Run the batch; the exit code of its worst outcome (2 for a bad request)."""
    out = out or sys.stdout
    if any(a in ("-h", "--help") for a in argv):
        out.write(USAGE)
        return 0
    stop = signals.stop if signals is not None else threading.Event()

    def stop_code() -> int:
        signum = signals.signum if signals is not None else None
        return ExitCode.stopped_by(signum) if signum is not None else ExitCode.SIGTERM

    try:
        request, trials, root = _prepare(argv)
    except ConfigurationError as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    specs = [JobSpec(t.name, t.location, tuple(request.job_args)) for t in trials]
    kept = {s.name: finished_outcome(s, root, retry_errors=request.retry_errors) for s in specs}
    to_run = [s for s in specs if kept[s.name] is None]
    jobs = request.jobs or (default_jobs() if request.engine == "pool" else None)
    at_once = f"{jobs} at once" if jobs else "one per CPU of the cluster"
    print(
        f"batch: {len(specs)} trial(s), {len(specs) - len(to_run)} finished earlier (kept), "
        f"{len(to_run)} to run on {request.engine} ({at_once}); output {root}",
        file=out,
        flush=True,
    )
    progress = _Progress(out, len(specs), len(specs) - len(to_run))
    failure: str | None = None
    try:
        if request.engine == "ray":
            ran = run_on_ray(
                to_run,
                root,
                jobs=request.jobs,
                address=request.ray_address,
                stop=stop,
                stop_code=stop_code,
                done=progress.record,
            )
        else:
            ran = run_on_pool(
                to_run, root, jobs=jobs, stop=stop, stop_code=stop_code, done=progress.record
            )
    except ConfigurationError as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    except Exception as e:  # the summary is written all the same, with what is known
        failure = f"InternalServerError: the batch failed: {type(e).__name__}: {e}"
        print(failure, file=sys.stderr)
        ran = list(progress.finished.values())
    by_name = {o.name: o for o in ran}
    final = [kept[s.name] or by_name.get(s.name) or _unfinished(s, failure) for s in specs]
    try:
        write_summary(root, final, engine=request.engine)
    except OSError as e:
        print(
            f"InternalServerError: cannot write the batch summary in {root}: {e}", file=sys.stderr
        )
        return ExitCode.INTERNAL_ERROR
    out.write(format_table(final))
    print(f"summary: {root / SUMMARY_PAGE}", file=out, flush=True)
    code = worst_exit_code(final)
    return stop_code() if stop.is_set() else code


def _prepare(argv: Sequence[str]) -> tuple[BatchRequest, list[Trial], Path]:
    """The request, its trials and the output folder (made); ConfigurationError for a bad
    request."""
    request = parse_request(argv)
    root = Path(request.output_dir)
    trials = find_trials(request.trials, request.trials_files, skip=root)
    if root.exists() and not root.is_dir():
        raise ConfigurationError(f"--output-dir {root} is a file: give a folder")
    root.mkdir(parents=True, exist_ok=True)
    return request, trials, root


class _Progress:
    """One line per finished job (``[3/10] name: status (exit 1) step 8 4.2 s``), and the
    outcomes heard so far."""

    def __init__(self, out: TextIO, total: int, already: int) -> None:
        self.out, self.total, self.count = out, total, already
        self.finished: dict[str, JobOutcome] = {}

    def record(self, outcome: JobOutcome) -> None:
        self.finished[outcome.name] = outcome
        self.count += 1
        step = "" if outcome.step is None else f" step {outcome.step}"
        seconds = "" if outcome.seconds is None else f" {outcome.seconds:.1f} s"
        print(
            f"[{self.count}/{self.total}] {outcome.name}: {outcome.status} "
            f"(exit {outcome.exit_code}){step}{seconds}",
            file=self.out,
            flush=True,
        )


def _unfinished(spec: JobSpec, failure: str | None) -> JobOutcome:
    """A job the batch has no outcome of: it failed before the job ended."""
    return JobOutcome(
        name=spec.name,
        trial=spec.trial,
        status="Error",
        exit_code=3,
        message=failure or "InternalServerError: the batch ended before this job did",
    )
