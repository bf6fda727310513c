"""The watch's end of its shared workers (``container.worker``: one evaluation process serving
up to ``--runs-per-worker`` runs whose rules are all built-in). This module never imports
the worker: the watch holds no rule code.

A worker is forked by the fork server (``ForkServer.start`` with the control socket as its
stdin) and supervised as a run is. ``add`` hands it a run (the run's arguments, environment
and its log, opened here and sent as a descriptor); ``poll`` takes what the workers said:
per run, ``{"ended": code}``, ``{"refused": why}`` (the run needs a process of its own),
or, when a worker died before the run ended, ``{"lost": <the worker's log>}``; ``take`` hands
that news to the run, once. A worker that refuses a run refuses every run of this watch
(they share their rules), and one that dies before it said anything cannot start here: the
pool then stops adding runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from container.watch.forks import ForkServer, read_json_lines

__all__ = ["WorkerPool"]

_STOP_GRACE = "5"  # the worker's supervisor: inside the watch's 10 s, as a run's


class _Worker:
    def __init__(self, pid: int, sock: socket.socket, log: Path) -> None:
        self.pid, self.sock, self.log = pid, sock, log
        self.runs: set[str] = set()  # handed to it, not ended
        self.buffer = b""
        self.said = False  # it answered once: it could start here


class WorkerPool:
    """The shared workers of one watch; ``per_worker`` runs each (0: none, every run in a
    process of its own)."""

    def __init__(self, forks: ForkServer, folder: Path, *, per_worker: int) -> None:
        self.forks, self.folder = forks, folder
        self.per_worker = per_worker
        self.enabled = per_worker > 0
        self.states: dict[str, dict[str, Any]] = {}  # run -> its ``outputs``, once said
        self._news: dict[str, dict[str, Any]] = {}
        self._workers: list[_Worker] = []
        self._count = 0

    def add(self, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        """Hand the run to a worker with room (started when none has). OSError: it could
        not be."""
        worker = self._with_room(env)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            line = (json.dumps({"add": name, "argv": list(argv), "env": dict(env)}) + "\n").encode()
            sent = socket.send_fds(worker.sock, [line], [fd])
            worker.sock.sendall(line[sent:])
        finally:
            os.close(fd)
        worker.runs.add(name)

    def stop(self, name: str, signum: int) -> None:
        """Ask the run's worker to end it ``Stopped``."""
        for worker in self._workers:
            if name in worker.runs:
                self._send(worker, {"stop": name, "signum": int(signum)})

    def take(self, name: str) -> dict[str, Any] | None:
        """What the run's worker said of it since (``ended``, ``refused``, ``lost``), once."""
        return self._news.pop(name, None)

    def pids(self) -> list[int]:
        """The workers' supervisors."""
        return [worker.pid for worker in self._workers]

    def poll(self) -> None:
        """Take what every worker said; a worker whose process ended has lost its runs. (The
        fork server's news is taken by the caller, ``ForkServer.poll``, before.)"""
        for worker in list(self._workers):
            self._read(worker)
            code = self.forks.exit_code(worker.pid)
            if code is not None:
                self._read(worker)
                self._lose(worker)

    def close(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.sock.close()
        self._workers.clear()

    # ---- the workers --------------------------------------------------------------------

    def _with_room(self, env: Mapping[str, str]) -> _Worker:
        for worker in self._workers:
            if len(worker.runs) < self.per_worker:
                return worker
        self._count += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / f"worker-{self._count}.log"
        ours, theirs = socket.socketpair()
        worker_env = dict(env)
        worker_env["EVALUATOR_OPT_ML"] = str(self.folder / "opt_ml")  # never made: no files
        worker_env["EVALUATOR_STOP_GRACE"] = _STOP_GRACE
        try:
            argv = ["watch-worker", "--folder", str(self.folder)]
            pid = self.forks.start(argv, worker_env, str(log), channel=theirs)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        worker = _Worker(pid, ours, log)
        self._workers.append(worker)
        return worker

    def _send(self, worker: _Worker, fields: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # gone: its end is read at the next poll
            worker.sock.sendall((json.dumps(fields) + "\n").encode())

    def _read(self, worker: _Worker) -> None:
        messages, worker.buffer = read_json_lines(worker.sock, worker.buffer)
        for message in messages:
            self._said(worker, message)

    def _said(self, worker: _Worker, message: dict[str, Any]) -> None:
        worker.said = True
        if "outputs" in message and isinstance(message.get("state"), dict):
            self.states[str(message["outputs"])] = message["state"]
        elif "ended" in message:
            worker.runs.discard(str(message["ended"]))
            self.states.pop(str(message["ended"]), None)
            self._news[str(message["ended"])] = {"ended": int(message.get("code", 3))}
        elif "refused" in message:
            worker.runs.discard(str(message["refused"]))
            self._news[str(message["refused"])] = {"refused": str(message.get("why"))}
            self.enabled = False  # every run of the watch has the same rules
            self._retire_idle()

    def _retire_idle(self) -> None:
        """Close the workers that hold no run (a worker whose socket closes exits); their
        ends are taken by ``poll`` as any worker's."""
        for worker in self._workers:
            if not worker.runs:
                with contextlib.suppress(OSError):
                    worker.sock.shutdown(socket.SHUT_WR)

    def _lose(self, worker: _Worker) -> None:
        """The worker is gone: each run it still had is lost (its last word, then a process of
        its own: ``container.watch.live``)."""
        self._workers.remove(worker)
        with contextlib.suppress(OSError):
            worker.sock.close()
        if not worker.said and worker.runs:  # it died before a word: it cannot start here
            self.enabled = False
        for name in worker.runs:
            self._news[name] = {"lost": str(worker.log)}
        worker.runs.clear()
