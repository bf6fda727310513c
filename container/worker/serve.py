"""The shared worker of ``rule-evaluator watch``: one evaluation process serving many watched
runs whose rules are all built-in (``rule-evaluator watch-worker``, started by the watch
through its fork server, supervised and confined as a single run's evaluation is; never
run it by hand).

It speaks JSON lines on its stdin, a Unix socket whose other end the watch holds
(``container.watch.workers``):

=========================================  ===================================================
from the watch                             the worker
=========================================  ===================================================
``{"add": run, "argv", "env"}`` with the   evaluates the run as ``rule-evaluator ARGV``
run's log (a descriptor, ``SCM_RIGHTS``)   with ``env`` (``container.worker.run``); says
                                           ``{"outputs": run, "state"}`` once its
                                           configuration is read, or ``{"refused": run,
                                           "why"}`` (not all built-in, or a step limit)
``{"stop": run, "signum": n}``             ends that run ``Stopped`` (exit 128 + n)
``{"stop_all": n}``, SIGTERM/SIGINT, or    ends every run ``Stopped``, then exits
the socket closing
=========================================  ===================================================

and ``{"ended": run, "code": c}`` when a run is over (its exit code, as a single run's). A
run that ends is forgotten (its trial closed by its evaluation, its threads ended).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from container.link import ChildLink
from container.signals import StopSignals
from container.worker.routing import RoutedStream, inherit_context_in_threads
from container.worker.run import PooledRun
from evaluator.errors import ClientError, ExitCode

__all__ = ["main"]

STOP_SECONDS = 4.5  # the runs' rules get 4 s (Evaluation.wait) inside the supervisor's 5
_MAX_FDS = 16


def main(argv: Sequence[str], *, signals: StopSignals, link: ChildLink | None = None) -> int:
    """Serve the watch until stopped; 128 + the signal then, 0 when the watch is gone.
    ``argv``: ``--folder DIR``, the worker's own folder (the run-as user's, like a run's
    output folder)."""
    try:
        channel = _channel()
        _drop_privileges(argv)
    except ClientError as e:
        print(f"ClientError: {e}", file=sys.stderr, flush=True)
        return ExitCode.CLIENT_ERROR
    from evaluator.engine.runner import get_loop

    get_loop()  # the shared loop's thread, in no run's context
    inherit_context_in_threads()
    sys.stdout = sys.stderr = RoutedStream(sys.__stdout__ or sys.stdout)
    return _Worker(channel, signals).serve()


def _channel() -> socket.socket:
    if not stat.S_ISSOCK(os.fstat(0).st_mode):
        raise ClientError(
            "watch-worker is started by rule-evaluator watch (its stdin is the watch's "
            "socket), never by hand"
        )
    return socket.socket(fileno=0)


def _drop_privileges(argv: Sequence[str]) -> None:
    """As a single run does, before any run is taken (``container.privileges``)."""
    from container.privileges import drop_privileges

    args = list(argv)
    if args[:1] != ["--folder"] or len(args) != 2:
        raise ClientError("watch-worker takes --folder DIR (its own folder)")
    drop_privileges(SimpleNamespace(output_dir=args[1]), os.environ)


class _Worker:
    def __init__(self, channel: socket.socket, signals: StopSignals) -> None:
        self.channel, self.signals = channel, signals
        self.runs: dict[str, PooledRun] = {}
        self._lock = threading.Lock()  # the runs and the channel's writes
        self._buffer = b""
        self._fds: list[int] = []
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

    def serve(self) -> int:
        signum = self._take_requests()
        self._stop_all(signum or signal.SIGTERM)
        return ExitCode.stopped_by(self.signals.signum) if self.signals.signum else 0

    def _take_requests(self) -> int | None:
        """Take the watch's requests until a stop; the stop's signal (None: the watch is
        gone)."""
        while not self.signals.stop.is_set():
            readable = select.select([self.channel.fileno(), self._wake_r], [], [])[0]
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 64)
            if self.channel.fileno() not in readable:
                continue
            data, fds, _, _ = socket.recv_fds(self.channel, 1 << 20, _MAX_FDS)
            self._fds += fds
            if not data:
                return None
            self._buffer += data
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                signum = self._take(json.loads(line))
                if signum is not None:
                    return signum
        return self.signals.signum

    def _take(self, request: dict[str, Any]) -> int | None:
        if "add" in request:
            self._add(request)
        elif "stop" in request:
            with self._lock:
                run = self.runs.get(str(request["stop"]))
            if run is not None:
                run.stop(int(request.get("signum", signal.SIGTERM)))
        elif "stop_all" in request:
            return int(request["stop_all"])
        return None

    def _add(self, request: dict[str, Any]) -> None:
        name = str(request["add"])
        if not self._fds:  # (the watch always sends the run's log with it)
            self._tell({"ended": name, "code": ExitCode.INTERNAL_ERROR})
            return
        run = PooledRun(name, request["argv"], request["env"], self._fds.pop(0), self._tell)
        with self._lock:
            self.runs[name] = run
        run.start()

    def _tell(self, fields: dict[str, Any]) -> None:
        """Send ``fields`` to the watch; an ended run is forgotten."""
        data = (json.dumps(fields) + "\n").encode()
        with self._lock:
            if "ended" in fields or "refused" in fields:
                self.runs.pop(str(fields.get("ended", fields.get("refused"))), None)
            with contextlib.suppress(OSError):  # the watch is gone: its stop follows
                self.channel.sendall(data)

    def _stop_all(self, signum: int) -> None:
        """Stop every run; wait ``STOP_SECONDS`` at most for them to say so."""
        if self.signals.signum is None:
            self.signals.signum = signum
        with self._lock:
            runs = list(self.runs.values())
        for run in runs:
            run.stop(signum)
        deadline = time.monotonic() + STOP_SECONDS
        for run in runs:
            run.thread.join(max(0.0, deadline - time.monotonic()))
