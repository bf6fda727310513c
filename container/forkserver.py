"""The fork server of ``rule-evaluator watch``: one process that has loaded the evaluator once
and forks every run's processes from itself, so that they share its pages.

A single run started the usual way is two fresh interpreters (the supervisor, then the
evaluation child), each loading Python, numpy and the evaluator again: about 45 MB of private
memory per run. Here the server imports everything an evaluation imports (``PRELOAD``, the
built-in rules included), freezes the garbage collector's view of it (``gc.freeze``: a
collection in a fork never writes to those objects' pages), and then only forks. Each fork
becomes one run's supervisor (``container.supervisor``, ``fork=True``), which forks the
evaluation child in turn instead of starting a new interpreter; both keep sharing, copy on
write, what the server loaded. Supervision is the single run's: the child is confined,
dies with its supervisor, and runs rule code (the user's only after the fork) as it always
does. The server runs no rule code: it imports the built-in rules' modules, never calls them.

It speaks JSON lines on the socket the watch hands it (``container.watch.forks`` is the other
end; file descriptor number in ``argv[1]``):

==========================================  ===================================================
from the watch                              the server
==========================================  ===================================================
``{"start": id, "argv", "env", "log"}``     forks a run: its own session, stdout and stderr
                                            appended to ``log``; answers ``{"started": id,
                                            "pid"}`` or ``{"failed": id, "error"}``
``{"signal": pid, "signum": n}``            sends ``n`` to that run's supervisor (a run it
                                            has not reaped yet: never a reused pid)
``{"kill": [pid, ...]}``                    SIGKILL to those runs' whole process groups
(the socket closes: the watch is gone)      SIGKILL to every run, then it exits
==========================================  ===================================================

and says ``{"ended": pid, "code": c}`` when a run's supervisor has ended (``c`` as
``Popen.returncode`` gives it: negative for a signal). It dies with the watch
(``PR_SET_PDEATHSIG``), and every run's supervisor dies with it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import pkgutil
import select
import signal
import socket
import sys
from typing import Any

__all__ = ["PRELOAD", "main"]

# What an evaluation imports (found with PYTHONPROFILEIMPORTTIME on a TensorBoard run and an
# smdebug trial): imported here once, shared by every fork.
PRELOAD = (
    "container.cli",
    "container.child",
    "container.compose",
    "container.confine",
    "container.help",
    "container.last_word",
    "container.lifetime",
    "container.link",
    "container.output_lines",
    "container.preflight",
    "container.privileges",
    "container.signals",
    "container.spawn",
    "container.supervisor",
    "evaluator.config",
    "evaluator.evaluation",
    "evaluator.report",
    "evaluator.reporting",
    "evaluator.sinks.actions",
    "evaluator.sinks.events",
    "evaluator.sinks.message_files",
    "evaluator.sinks.report",
    "evaluator.sinks.result_file",
    "evaluator.status.logging",
    "evaluator.trial",
    "html",
    "importlib.readers",
    "numpy.ma",
    "rules_builtin.registry",
)
_TICK = 5.0  # at most this long between looks for ended runs (SIGCHLD wakes it sooner)


def main(argv: list[str] | None = None) -> int:
    """Serve the watch on the socket whose descriptor is the first argument; the other
    arguments name modules to load besides ``PRELOAD`` (what the watch's runs also need)."""
    from container.lifetime import die_with_parent

    args = sys.argv[1:] if argv is None else argv
    die_with_parent()
    sock = socket.socket(fileno=int(args[0]))
    preload(args[1:])
    return _Server(sock).serve()


def preload(more: list[str] | None = None) -> None:
    """Import what every run needs (and ``more``, when installed), then keep the collector off
    those objects' pages."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in more or ():
        with contextlib.suppress(ImportError):  # the run says what to install
            importlib.import_module(name)
    import rules_builtin

    for module in pkgutil.iter_modules(rules_builtin.__path__, "rules_builtin."):
        # a rule whose optional library is missing loads it later, or not
        with contextlib.suppress(ImportError):
            importlib.import_module(module.name)
    gc.collect()
    gc.freeze()


class _Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.runs: set[int] = set()  # started, not reaped
        self._buffer = b""
        # A run that ends wakes the loop at once: SIGCHLD writes to this pipe.
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def serve(self) -> int:
        while True:
            readable = select.select([self.sock.fileno(), self._wake_r], [], [], _TICK)[0]
            if self._wake_r in readable:
                _drain(self._wake_r)
            if self.sock.fileno() in readable:
                data = self.sock.recv(1 << 20)
                if not data:
                    self._kill_all()
                    return 0
                self._buffer += data
                *lines, self._buffer = self._buffer.split(b"\n")
                for line in lines:
                    self._take(json.loads(line))
            self._reap()

    def _take(self, request: dict[str, Any]) -> None:
        if "start" in request:
            try:
                pid = self._fork(request)
            except OSError as e:
                self._send(failed=request["start"], error=str(e))
            else:
                self.runs.add(pid)
                self._send(started=request["start"], pid=pid)
        elif request.get("signal") in self.runs:
            _signal(request["signal"], int(request["signum"]))
        elif "kill" in request:
            for pid in set(request["kill"]) & self.runs:
                _signal(-pid, signal.SIGKILL)

    def _fork(self, request: dict[str, Any]) -> int:
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        server = os.getpid()
        try:
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(self._wake_r)
                os.close(self._wake_w)
                _become_run(self.sock, log, server, request)
        finally:
            os.close(log)
        return pid

    def _reap(self) -> None:
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.runs:
                self.runs.discard(pid)
                self._send(ended=pid, code=os.waitstatus_to_exitcode(status))

    def _kill_all(self) -> None:
        for pid in self.runs:
            _signal(-pid, signal.SIGKILL)
        for _ in list(self.runs):
            try:
                os.wait()
            except ChildProcessError:
                break

    def _send(self, **fields: Any) -> None:
        with contextlib.suppress(OSError):  # the watch is gone: the next recv says so
            self.sock.sendall((json.dumps(fields) + "\n").encode())


def _become_run(sock: socket.socket, log: int, server: int, request: dict[str, Any]) -> None:
    """In the fork: become the run's supervisor, as ``rule-evaluator ARGV`` started in its own
    session with the request's environment and its output appended to ``log``. Never
    returns."""
    code = 3
    try:
        from container.lifetime import die_with_parent

        argv, env = list(request["argv"]), dict(request["env"])
        sock.close()
        os.setsid()
        die_with_parent(server)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["rule-evaluator", *argv]
        from container.supervisor import main as supervise

        code = supervise(argv, fork=True)
    except BaseException as e:  # never back into the server's loop
        print(f"InternalServerError: the run could not start: {e}", file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _drain(fd: int) -> None:
    """Read ``fd`` (non-blocking) until nothing waits on it."""
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            continue


def _signal(target: int, signum: int) -> None:
    with contextlib.suppress(OSError):  # (gone already)
        if target < 0:
            os.killpg(-target, signum)
        else:
            os.kill(target, signum)


if __name__ == "__main__":
    sys.exit(main())
