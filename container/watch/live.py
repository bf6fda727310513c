"""One watched run: a single ``rule-evaluator`` run (the supervisor and its evaluation child,
the command line of a batch job: ``container.batch.job.JobSpec``) on the run's location, into
``<output>/<run name>/``, with what it has said so far. Its processes are forked by the
watch's fork server (``container.watch.forks``), so they share the evaluator's pages.

A run whose rules are all built-in joins a shared worker instead (``container.watch.workers``:
one evaluation process for many runs, each run there exactly a single run's evaluation); a
worker that refuses it (not all built-in) or dies before the run's verdict hands it back: a
run lost so gets its last word first (said by a fork of the server as a dead child's
supervisor says it), then, unless that word is a verdict or the watch is stopping, a process
of its own, which resumes from the result file.

The run's process writes exactly what a single run writes there; its log lines go to
``<output>/.watch/logs/<run name>.log``. What the watch shows of it comes from two files the
process writes anyway: the result file (statuses, firing steps, diagnosis; rewritten at every
status change, read again only when it changed) and the log, read from where the last look
stopped, for the last step each rule reached (``rule_progress`` and ``rule_status`` lines).
The watch process never runs rule code, nor opens the run's data.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from container.batch.job import JobSpec
from container.discovery import Run
from container.privileges import give_output_folder
from container.watch.forks import LOST_CODE, ForkServer
from container.watch.workers import WorkerPool
from evaluator.errors import ClientError
from evaluator.status.files import RESULT_FILE_NAME, ResultFileError, read_result_file

__all__ = ["FINISHED_CODES", "WATCH_FOLDER", "LiveRun", "read_result"]

WATCH_FOLDER = ".watch"
FINISHED_CODES = (0, 1, 2)  # a verdict or a client error: the run is not run again
_RUN_STOP_GRACE = "5"  # each run's own supervisor: inside the watch's 10 s
_LOG_READ_LIMIT = 1 << 20  # bytes of a run's log read per look
_WATCHED_EVENTS = (b'"rule_progress"', b'"rule_status"')


def read_result(output: Path) -> dict[str, Any] | None:
    """The run's result document; None when there is none (yet) or it cannot be taken."""
    try:
        return read_result_file(output)
    except (FileNotFoundError, NotADirectoryError, ResultFileError):
        return None


class LiveRun:
    """A run being evaluated: ``start``, then ``poll`` until it says the process ended."""

    def __init__(self, run: Run, root: Path, args: tuple[str, ...]) -> None:
        self.run = run
        self.output = root / run.name
        self.log_path = root / WATCH_FOLDER / "logs" / f"{run.name}.log"
        self._opt_ml = root / WATCH_FOLDER / "opt_ml" / run.name  # never made: no message files
        self._spec = JobSpec(run.name, run.location, args)
        self._server: ForkServer | None = None
        self._pool: WorkerPool | None = None
        self._env: dict[str, str] = {}
        self.pid: int | None = None  # the run's supervisor (its last word's, once lost)
        self.pooled = False  # in a shared worker (then no pid of its own)
        self._last_word = False  # the pid is the last word's, after its worker died
        self.stopping: int | None = None  # the signal the watch stopped it with
        self.notes: list[str] = []  # what the watch says of it (taken by the watch)
        self._offset = 0
        self._partial = b""
        self._result_stamp: tuple[int, int] | None = None
        self.document: dict[str, Any] | None = None  # the result file, as last read
        self.last_steps: dict[str, int] = {}  # rule -> last step it reached
        self.exit_code: int | None = None
        self.message: str | None = None  # the run's last error line, when it wrote no result

    def start(
        self, environ: Mapping[str, str], server: ForkServer, pool: WorkerPool | None = None
    ) -> None:
        """Start the run: in a shared worker of ``pool`` when it takes runs, else in processes
        of its own (their own session: a stop reaches them from the watch only). OSError: it
        could not be."""
        self.output.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(environ)
        env["EVALUATOR_OPT_ML"] = str(self._opt_ml)
        env.setdefault("EVALUATOR_STOP_GRACE", _RUN_STOP_GRACE)
        self.log_path.touch()
        self._offset = self.log_path.stat().st_size
        self._server, self._pool, self._env = server, pool, env
        if pool is None or not pool.enabled:
            self._start_own()
            return
        try:  # the worker runs as EVALUATOR_RUN_AS already: the folder must be that user's
            give_output_folder(self.output, env)
        except ClientError:
            pass  # the run itself says what is wrong with its folder
        pool.add(self.run.name, self._arguments(), env, self.log_path)
        self.pooled = True

    def _start_own(self) -> None:
        assert self._server is not None
        self.pooled, self._last_word = False, False
        self.pid = self._server.start(self._arguments(), self._env, str(self.log_path))

    def _arguments(self) -> list[str]:
        return list(self._spec.arguments(str(self.output)))

    def poll(self) -> bool:
        """Read what the run wrote since the last look; True once it has ended (then
        everything it wrote has been read). The server's and the workers' news is taken by
        the caller (``ForkServer.poll``, ``WorkerPool.poll``) before."""
        code = self._ended_code()
        self._read_log()
        self._read_result()
        if code is None:
            return False
        self.exit_code = code
        if self.document is None or self.document.get("exit_code") is None:
            self.message = _last_error(self.log_path)
        return True

    def _ended_code(self) -> int | None:
        """The run's exit code once it has ended; a run its worker hands back is started
        again here (its last word, then a process of its own)."""
        try:
            return self._worker_news() if self.pooled else self._own_end()
        except OSError as e:  # the fork server could not start it again
            self.notes.append(f"cannot be started again: {e}")
            return LOST_CODE

    def _worker_news(self) -> int | None:
        news = self._pool.take(self.run.name) if self._pool is not None else None
        if news is None or "ended" in news:
            return None if news is None else int(news["ended"])
        if "refused" in news:
            self.notes.append(f"needs a process of its own ({news['refused']})")
            self._start_own()
        else:
            self._say_last_word(Path(news["lost"]))
        return None

    def _own_end(self) -> int | None:
        if self._server is None or self.pid is None:
            return None
        code = self._server.exit_code(self.pid)
        if code is None or not self._last_word:
            return code
        if code in FINISHED_CODES or self.stopping is not None:
            return code  # its last word stands
        self.notes.append("restarted in a process of its own")
        self._start_own()
        return None

    def _say_last_word(self, worker_log: Path) -> None:
        """Its worker died before the run's verdict: its last word, as a dead child's
        supervisor says it (a finished result file stands; else Stopped or an Error)."""
        assert self._server is not None and self._pool is not None
        state = self._pool.states.pop(self.run.name, {"result_dir": str(self.output.absolute())})
        died = _last_error(worker_log) or "InternalServerError: its shared worker ended"
        why = died.removeprefix("InternalServerError: ")
        stops = [] if self.stopping is None else [self.stopping]
        self.notes.append(f"lost with its worker: {why}")
        self.pooled, self._last_word = False, True
        self.pid = self._server.last_word(
            state, self._env, str(self.log_path), why=why, stops=stops
        )

    def signal(self, signum: int) -> None:
        """Ask the run to stop (its supervisor, or its worker, ends it ``Stopped`` within its
        grace)."""
        self.stopping = signum
        if self.pooled and self._pool is not None:
            self._pool.stop(self.run.name, signum)
        elif self._server is not None and self.pid is not None and not self._last_word:
            self._server.signal(self.pid, signum)

    # ---- what the run wrote -------------------------------------------------------------

    def _read_result(self) -> None:
        try:
            info = (self.output / RESULT_FILE_NAME).stat()
        except OSError:
            return
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._result_stamp:
            document = read_result(self.output)
            if document is not None:
                self.document, self._result_stamp = document, stamp

    def _read_log(self) -> None:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._offset)
                data = f.read(_LOG_READ_LIMIT)
        except OSError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-_LOG_READ_LIMIT:]
        for line in lines:
            if line.startswith(b"{") and any(e in line for e in _WATCHED_EVENTS):
                self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            fields = json.loads(line)
        except ValueError:
            return
        rule, step = fields.get("rule"), fields.get("step")
        if isinstance(rule, str) and isinstance(step, int) and not isinstance(step, bool):
            self.last_steps[rule] = max(step, self.last_steps.get(rule, step))


def _last_error(log: Path) -> str | None:
    """The last ``ClientError:`` / ``InternalServerError:`` line the run printed."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.strip().startswith(("ClientError:", "InternalServerError:")):
            return line.strip()[:2000]
    return lines[-1].strip()[:2000] if lines else None
