"""One watched run: a single ``rule-evaluator`` run (the supervisor and its evaluation child,
the command line of a batch job: ``container.batch.job.JobSpec``) on the run's location, into
``<output>/<run name>/``, with what it has said so far. Its processes are forked by the
watch's fork server (``container.watch.forks``), so they share the evaluator's pages.

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
from container.watch.forks import ForkServer
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
        self.pid: int | None = None  # the run's supervisor
        self._offset = 0
        self._partial = b""
        self._result_stamp: tuple[int, int] | None = None
        self.document: dict[str, Any] | None = None  # the result file, as last read
        self.last_steps: dict[str, int] = {}  # rule -> last step it reached
        self.exit_code: int | None = None
        self.message: str | None = None  # the run's last error line, when it wrote no result

    def start(self, environ: Mapping[str, str], server: ForkServer) -> None:
        """Start the run's processes (their own session: a stop reaches them from the watch
        only). OSError: they could not be."""
        self.output.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(environ)
        env["EVALUATOR_OPT_ML"] = str(self._opt_ml)
        env.setdefault("EVALUATOR_STOP_GRACE", _RUN_STOP_GRACE)
        self.log_path.touch()
        self._offset = self.log_path.stat().st_size
        self._server = server
        self.pid = server.start(self._spec.arguments(str(self.output)), env, str(self.log_path))

    def poll(self) -> bool:
        """Read what the run wrote since the last look; True once its process has ended (then
        everything it wrote has been read). The server's news is taken by the caller
        (``ForkServer.poll``) before."""
        code = None
        if self._server is not None and self.pid is not None:
            code = self._server.exit_code(self.pid)
        self._read_log()
        self._read_result()
        if code is None:
            return False
        self.exit_code = code
        if self.document is None or self.document.get("exit_code") is None:
            self.message = _last_error(self.log_path)
        return True

    def signal(self, signum: int) -> None:
        """Ask the run to stop (its supervisor ends it ``Stopped`` within its grace)."""
        if self._server is not None and self.pid is not None:
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
