"""The ``watch`` subcommand: look at the root every poll interval, start a run's evaluation
when it appears, follow every live run, write the status and the index when something
changed (at most ``--max-live`` runs at once, the others queued in the order found), and on SIGTERM/SIGINT stop every run (each ends ``Stopped``, its files written) and
exit 143/130.

A run whose result file in the output folder holds a verdict or a client error (exit 0, 1 or
2) has ended: it is listed, never run again, so a restarted watch notifies nothing twice. Any
other run (no result file, ``InProgress``, ``Stopped``, a killed process) is started, and a
single run resumes from its result file where it can (``evaluator.status.resume``). A run
that ends is dropped (its process and what was read of it); its line in the status stays.
A run found ``held`` (an MLflow run with no metric yet, a sweep's parent run) is listed with
why, and not started until a later look finds it no longer held.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TextIO

from container.discovery import Discovery, Run, RunFinder, in_shard
from container.watch.experiment import MLFLOW_PRELOAD, experiment_finder
from container.watch.forks import ForkServer
from container.watch.live import FINISHED_CODES, WATCH_FOLDER, LiveRun, read_result
from container.watch.metrics import StatusServer, WatchMetrics
from container.watch.request import USAGE, WatchRequest, parse_request
from container.watch.status import RunEntry, write_status
from container.watch.workers import WorkerPool
from evaluator.errors import ClientError, ConfigurationError, ExitCode
from evaluator.storage.schemes import is_remote

__all__ = ["main"]

IDLE_SCANS = "150"  # scans slow down to max_poll_interval (4 s) while nothing is new
STOP_WAIT = 6.5  # seconds the runs get to stop (theirs: 5), inside the supervisor's 8


class _Finder(Protocol):
    """What finds the runs at each look: ``RunFinder`` (a ROOT) or ``ExperimentFinder``."""

    def find(self) -> Discovery: ...


class _Stop(Protocol):
    """The stop signal's state, as ``container.signals.StopSignals`` keeps it."""

    stop: threading.Event
    signum: int | None


def main(argv: Sequence[str], *, signals: _Stop | None = None, out: TextIO | None = None) -> int:
    """Watch until stopped; 143/130 then, 2 for a bad request."""
    out = out or sys.stdout
    if any(a in ("-h", "--help") for a in argv):
        out.write(USAGE)
        return 0
    stop = signals.stop if signals is not None else threading.Event()
    try:
        request = parse_request(argv)
        watcher = Watcher(request, os.environ, out=out)
    except ClientError as e:  # a bad request, an experiment the store does not hold
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    try:
        watcher.watch(stop)
        signum = signals.signum if signals is not None else None
        watcher.finish(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)
    finally:
        watcher.close()
    return ExitCode.stopped_by(signum) if signum is not None else ExitCode.SIGTERM


class Watcher:
    """The runs of one root: started, followed and listed."""

    def __init__(self, request: WatchRequest, environ: Mapping[str, str], *, out: TextIO) -> None:
        self.request, self.out = request, out
        self.dir = Path(request.output_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigurationError(f"--output-dir {self.dir} is a file: give a folder")
        self.env = dict(environ)
        self.finder, watched = self._finder(request)
        self.dir.mkdir(parents=True, exist_ok=True)
        if request.webhook_url is not None:
            self.env["WEBHOOK_URL"] = request.webhook_url
        self.metrics = WatchMetrics()
        self.server = (
            None
            if request.status_address is None
            else StatusServer(request.status_address, self.metrics)
        )
        # every run's processes: forked, sharing its pages (MLflow's client too, for its runs:
        # about 150 MB that each run would otherwise load on its own)
        self.forks = ForkServer(preload=MLFLOW_PRELOAD if request.root is None else ())
        # runs whose rules are all built-in share evaluation processes (--runs-per-worker)
        self.pool = WorkerPool(
            self.forks, self.dir / WATCH_FOLDER / "workers", per_worker=request.runs_per_worker
        )
        self.live: dict[str, LiveRun] = {}
        self.queue: list[Run] = []  # found, not started: more than --max-live are live
        self.entries: dict[str, RunEntry] = {}
        self._problems: set[str] = set()
        self._say(
            f"watch: {watched} -> {self.dir} (shard {request.shard[0]}/{request.shard[1]}, "
            f"every {request.poll_interval:g} s)"
            + ("" if self.server is None else f"; status on port {self.server.port}")
        )

    def _finder(self, request: WatchRequest) -> tuple[_Finder, str]:
        """What finds the runs, and what it looks at (for the first line)."""
        if request.root is None:
            finder = experiment_finder(request, self.env)
            return finder, f"MLflow experiment {finder.experiment.shown}"
        if not is_remote(request.root) and not Path(request.root).is_dir():
            raise ConfigurationError(
                f"ROOT {request.root} is not a folder: give the folder (or s3://bucket/prefix) "
                "where the runs appear"
            )
        # A live run is quiet for minutes at times (evaluation, checkpoints): two idle scans,
        # a single run's default for a folder, would end it early. About ten minutes here.
        # (An MLflow run ends by its status, never by idle scans.)
        self.env.setdefault("EVALUATOR_IDLE_SCANS_TO_COMPLETE", IDLE_SCANS)
        return RunFinder(request.root, skip=self.dir), request.root

    def watch(self, stop: threading.Event) -> None:
        """Look and follow every poll interval until ``stop``."""
        self._write()
        while not stop.is_set():
            started = time.monotonic()
            changed = self._follow() | self._look()
            if changed:
                self._write()
            self.metrics.poll_duration.observe(time.monotonic() - started)
            stop.wait(self.request.poll_interval)

    def finish(self, signum: int) -> None:
        """Stop every run with ``signum``, read what they wrote, write the status."""
        self._stop_runs(signum)
        self._follow()
        self._write()

    def close(self) -> None:
        self.pool.close()  # a worker whose socket closes stops its runs
        self.forks.close()  # the server kills every run it still has
        if self.server is not None:
            self.server.close()

    # ---- one look -----------------------------------------------------------------------

    def _look(self) -> bool:
        """Find the runs; start the new ones. Whether any was added."""
        found = self.finder.find()
        for problem in found.problems:
            if problem not in self._problems:  # said once, counted once
                self._problems.add(problem)
                self.metrics.errors.labels("discovery").inc()
                self._say(f"watch: cannot look at {problem}")
        added = False
        for run in found.runs:
            entry = self.entries.get(run.name)
            if (entry is not None and not entry.held) or not in_shard(run.name, self.request.shard):
                continue
            added |= self._hold(run) if run.held is not None else self._add(run)
        while self.queue and len(self.live) < self.request.max_live:
            self._start(self.queue.pop(0))
        self.metrics.runs_queued.set(len(self.queue))
        return added

    def _add(self, run: Run) -> bool:
        """A run to evaluate: queued, or listed as it ended before this watch started."""
        entry = self.entries[run.name] = RunEntry(run.name, run.location, title=run.title)
        output = self.dir / run.name
        earlier = read_result(output)
        if earlier is not None and earlier.get("exit_code") in FINISHED_CODES:
            entry.update(earlier, last_steps={}, ended=True, output=output)
            self.metrics.runs_kept.inc()
            self._say(f"watch: {_shown(run)} ended earlier ({earlier.get('status')}): kept")
            return True
        entry.queue()
        self.queue.append(run)
        return True

    def _hold(self, run: Run) -> bool:
        """A run listed, not evaluated (yet): ``run.held`` says why. Whether that changed."""
        assert run.held is not None
        entry = self.entries.get(run.name)
        if entry is None:
            entry = self.entries[run.name] = RunEntry(run.name, run.location, title=run.title)
        if not entry.hold(run.held):
            return False
        self._say(f"watch: {_shown(run)} {run.held.status}: {run.held.message}")
        return True

    def _start(self, run: Run) -> None:
        entry = self.entries[run.name]
        live = self.live[run.name] = LiveRun(run, self.dir, self.request.run_args)
        try:
            live.start(self.env, self.forks, self.pool)
        except OSError as e:  # a folder of the output that cannot be made: this run's Error
            del self.live[run.name]
            self._ended(entry, live, message=f"InternalServerError: cannot start the run: {e}")
            return
        self.metrics.runs_live.inc()
        where = "in a shared worker" if live.pooled else f"pid {live.pid}"
        self._say(f"watch: {_shown(run)} started ({where})")

    def _follow(self) -> bool:
        """Read what every live run wrote; drop the ones that ended. Whether any changed."""
        changed = False
        self.forks.poll()
        self.pool.poll()
        for name, live in list(self.live.items()):
            entry = self.entries[name]
            before = _fired(entry)
            ended = live.poll()
            for note in live.notes:
                self._say(f"watch: {name} {note}")
            live.notes.clear()
            if ended:
                del self.live[name]
                self.metrics.runs_live.dec()
                self._ended(entry, live, message=live.message)
                changed = True
            else:
                changed |= entry.update(
                    live.document, last_steps=live.last_steps, ended=False, output=live.output
                )
            for rule in _fired(entry) - before:
                self.metrics.firings.labels(rule).inc()
        return changed

    def _ended(self, entry: RunEntry, live: LiveRun, *, message: str | None) -> None:
        entry.update(
            live.document,
            last_steps=live.last_steps,
            ended=True,
            exit_code=live.exit_code,
            message=message,
            output=live.output,
        )
        status = str(entry.fields["status"])
        self.metrics.runs_ended.labels(status).inc()
        if status == "Error":
            self.metrics.errors.labels("run").inc()
        self._say(f"watch: {entry.name} ended: {status} (exit {entry.fields.get('exit_code')})")

    # ---- outputs and the stop -----------------------------------------------------------

    def _write(self) -> None:
        try:
            write_status(self.dir, self.entries.values(), shard=self.request.shard)
        except OSError as e:
            self.metrics.errors.labels("status_file").inc()
            self._say(f"watch: cannot write the status in {self.dir}: {e}")

    def _stop_runs(self, signum: int) -> None:
        """Ask every run to stop; kill those still there after ``STOP_WAIT`` seconds."""
        for live in self.live.values():
            live.signal(signum)
        deadline = time.monotonic() + STOP_WAIT
        while self.live and time.monotonic() < deadline:
            self._follow()
            time.sleep(0.1)
        own = [live.pid for live in self.live.values() if live.pid is not None]
        self.forks.kill([*own, *self.pool.pids()])

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def _shown(run: Run) -> str:
    """The run for the watch's lines: its name, with its title (an MLflow run's name)."""
    return run.name if run.title is None else f"{run.name} ({run.title})"


def _fired(entry: RunEntry) -> set[str]:
    rules = entry.fields.get("rules") or []
    return {str(r["rule"]) for r in rules if r.get("status") == "IssuesFound"}
