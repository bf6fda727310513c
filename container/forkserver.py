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
                                            "pid"}`` or ``{"failed": id, "error"}``. With
                                            ``"channel": true``, the socket that came with the
                                            line (``SCM_RIGHTS``) is the run's stdin: a shared
                                            worker's control channel (``container.worker``)
``{"last_word": id, "state", "env",         forks the last word of a run whose shared worker
"why", "stops", "log"}``                    died before its verdict (``container.last_word``,
                                            as a dead child's supervisor says it); answered
                                            and ended as a run is
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
_MAX_FDS = 16  # descriptors taken with one read (one per channel request)


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
        self._fds: list[int] = []  # descriptors that came with requests, in their order
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
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, _MAX_FDS)
                self._fds += fds
                if not data:
                    self._kill_all()
                    return 0
                self._buffer += data
                *lines, self._buffer = self._buffer.split(b"\n")
                for line in lines:
                    self._take(json.loads(line))
            self._reap()

    def _take(self, request: dict[str, Any]) -> None:
        ident = request.get("start", request.get("last_word"))
        if ident is not None:
            channel = self._fds.pop(0) if request.get("channel") and self._fds else None
            try:
                pid = self._fork(request, channel)
            except OSError as e:
                self._send(failed=ident, error=str(e))
            else:
                self.runs.add(pid)
                self._send(started=ident, pid=pid)
            finally:
                if channel is not None:
                    os.close(channel)
        elif request.get("signal") in self.runs:
            _signal(request["signal"], int(request["signum"]))
        elif "kill" in request:
            for pid in set(request["kill"]) & self.runs:
                _signal(-pid, signal.SIGKILL)

    def _fork(self, request: dict[str, Any], channel: int | None) -> int:
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        server = os.getpid()
        try:
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(self._wake_r)
                os.close(self._wake_w)
                for fd in self._fds:
                    os.close(fd)
                if "last_word" in request:
                    _become_last_word(self.sock, log, server, request)
                _become_run(self.sock, log, server, request, channel)
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


def _become_run(
    sock: socket.socket, log: int, server: int, request: dict[str, Any], channel: int | None
) -> None:
    """In the fork: become the run's supervisor, as ``rule-evaluator ARGV`` started in its own
    session with the request's environment, ``channel`` (else nothing) as its stdin and its
    output appended to ``log``. Never returns."""
    code = 3
    try:
        argv = list(request["argv"])
        _set_up_fork(sock, log, server, request, channel)
        sys.argv = ["rule-evaluator", *argv]
        from container.supervisor import main as supervise

        code = supervise(argv, fork=True)
    except BaseException as e:  # never back into the server's loop
        print(f"InternalServerError: the run could not start: {e}", file=sys.stderr)
    finally:
        _exit_flushed(code)


def _become_last_word(sock: socket.socket, log: int, server: int, request: dict[str, Any]) -> None:
    """In the fork: say the last word of a run whose shared worker died before the run's
    verdict (``container.last_word.conclude``, as the supervisor of a dead child says it:
    a finished result file stands, else ``Stopped`` after a stop, else an ``Error``), and
    exit with the run's code. Never returns."""
    code = 3
    try:
        _set_up_fork(sock, log, server, request, None)
        code = _last_word(request)
    except BaseException as e:  # never back into the server's loop
        print(f"InternalServerError: the run's last word failed: {e}", file=sys.stderr)
    finally:
        _exit_flushed(code)


def _exit_flushed(code: int) -> None:
    """End the fork with ``code``, its output flushed (never the server's exit handlers)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _last_word(request: dict[str, Any]) -> int:
    from container.compose import final_sinks
    from container.last_word import conclude
    from evaluator.fileio import open_folder

    state = dict(request["state"])
    folder = state.get("result_dir")
    result_fd = None
    if isinstance(folder, str):
        with contextlib.suppress(OSError, ValueError):
            result_fd = open_folder(folder)
    return conclude(
        stops=[int(s) for s in request.get("stops", [])],
        overrun=None,
        untrusted=True,
        verdict=None,
        said_done=False,
        result_fd=result_fd,
        message_fd=None,
        wait_status=0,
        sinks=final_sinks(state, result_fd, None),
        result_dir=folder if isinstance(folder, str) else None,
        why=str(request.get("why") or "the shared evaluation process ended"),
    )


def _set_up_fork(
    sock: socket.socket, log: int, server: int, request: dict[str, Any], channel: int | None
) -> None:
    """The fork's own session, dying with the server; ``channel`` (else nothing) as stdin,
    ``log`` as stdout and stderr, the request's environment."""
    from container.lifetime import die_with_parent

    env = dict(request["env"])
    sock.close()
    os.setsid()
    die_with_parent(server)
    stdin = os.open(os.devnull, os.O_RDONLY) if channel is None else channel
    os.dup2(stdin, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(stdin)
    os.close(log)
    os.environ.clear()
    os.environ.update(env)


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
