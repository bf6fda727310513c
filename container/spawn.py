"""Start the evaluation process (``container.child``) for the supervisor, confined: a new
interpreter, or, in a process that has the evaluation loaded already (a run of
``container.forkserver``), a fork of itself (``fork=True``), set up the same way.

* Its file descriptors: the write ends of the control pipe, of the pipes that become its
  stdout and stderr, and of its log's pipe (``container.link``), with the supervisor's
  stdin, stdout and stderr, which it gives up once its configuration is read.
* Where the supervisor may, it is the first process of a PID namespace of its own
  (``container.lifetime.child_in_new_pid_namespace``).
* Between ``fork`` and ``exec``: SIGTERM/SIGINT unblocked again, the parent-death signal set,
  and the seccomp filter of ``container.confine`` installed (the supervisor and its
  ancestors cannot be signalled by anything the evaluation starts).

Standard library only, imported by the supervisor before the evaluator.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Started", "confinement_fields", "start_child"]

# The child: this package's ``container.child`` with the interpreter running us, started with
# the script folder or working directory left out of the import path (a folder named like one
# of our packages there must not replace it).
_BOOT = "import sys; del sys.path[0]; from container.child import main; sys.exit(main())"


@dataclass
class Started:
    """The evaluation process: its pid, the read ends of its pipes (``control``, ``stdout``,
    ``stderr``, ``log`` by fd), whether it has a PID namespace and a seccomp filter."""

    pid: int
    pipes: dict[int, str]
    namespaced: bool
    filtered: bool


def start_child(
    args: Sequence[str], unblock: Sequence[signal.Signals], *, fork: bool = False
) -> Started:
    """Start ``container.child`` with ``args``; ``unblock``: the signals the supervisor blocks,
    which the child takes again; ``fork``: fork this process (which has the evaluation loaded)
    instead of starting an interpreter. Raises OSError when it cannot be started."""
    from container.confine import filter_program
    from container.lifetime import ENV_PID_NAMESPACE, ancestors, child_in_new_pid_namespace
    from container.link import ENV_FDS

    names = ("control", "stdout", "stderr", "log")
    ends = [os.pipe() for _ in names]
    writers = tuple(w for _, w in ends)
    env = dict(os.environ)
    env[ENV_FDS] = ",".join(str(w) for w in writers)
    supervisor = os.getpid()
    program = filter_program(supervisor, os.getpgrp(), ancestors())
    # batch and watch run no rule code themselves: each of their runs is a supervisor of its
    # own, which makes its own namespace (in one of ours, /proc would not number its processes)
    runs_rules = list(args[:1]) not in (["batch"], ["watch"])
    namespace = child_in_new_pid_namespace(None if runs_rules else {ENV_PID_NAMESPACE: "off"})
    try:
        with namespace as namespaced:
            prepare = _prepare(0 if namespaced else supervisor, program, unblock)
            if fork:
                pid = _fork_child(args, writers, env, prepare)
            else:
                pid = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, *args],
                    pass_fds=writers,
                    env=env,
                    process_group=0,
                    preexec_fn=prepare,
                ).pid
    except OSError:
        for pair in ends:
            for fd in pair:
                os.close(fd)
        raise
    for fd in writers:
        os.close(fd)
    pipes = {r: name for (r, _), name in zip(ends, names, strict=True)}
    return Started(pid, pipes, namespaced, program is not None)


def _prepare(
    parent: int, program: bytes | None, unblock: Sequence[signal.Signals]
) -> Callable[[], None]:
    """What the child does between fork and exec. ``parent``: the pid its parent has there
    (0 for a parent outside its PID namespace)."""
    from container.confine import confine
    from container.lifetime import die_with_parent

    def prepare() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, unblock)
        die_with_parent(parent)
        confine(program)

    return prepare


def _fork_child(
    args: Sequence[str], fds: tuple[int, ...], env: dict[str, str], prepare: Callable[[], None]
) -> int:
    """The evaluation child forked from this process, set up as ``Popen`` sets up the
    interpreter it starts (its own process group, only ``fds`` besides 0-2 open, ``env``);
    its pid."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        prepare()
        os.setpgid(0, 0)
        for fd in _open_fds():
            if fd > 2 and fd not in fds:
                with contextlib.suppress(OSError):  # (the listing's own)
                    os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["-c", *args]
        from container.child import main as child

        code = child()
    except BaseException as e:  # never back into the supervisor's loop
        print(f"InternalServerError: the evaluation could not start: {e}", file=sys.stderr)
    finally:
        os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def confinement_fields(namespaced: bool, filtered: bool) -> dict[str, Any]:
    """The ``run_confinement`` log line's fields: what keeps rule code's processes from the
    supervisor and ends them with the run, and what is missing here."""
    from container.lifetime import ENV_PID_NAMESPACE

    if namespaced:
        ends = "PID namespace (the kernel ends every process in it with the evaluation)"
    else:
        ends = (
            "process tree (no PID namespace here: it needs root with CAP_SYS_ADMIN, or "
            f"{ENV_PID_NAMESPACE} is off; a process that escapes the tree is an error)"
        )
    return {
        "pid_namespace": namespaced,
        "signal_filter": "seccomp" if filtered else "none (not Linux x86-64 or arm64)",
        "processes_end_by": ends,
    }
