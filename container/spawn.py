"""How the supervisor (``container.supervisor``) starts its evaluation child: a new
interpreter running ``container.child`` (the command as it always runs), or, in a process
that has the evaluation loaded already (a run of ``container.forkserver``), a fork of itself.

Either way the child is set up the same: SIGTERM/SIGINT unblocked with their default action
until ``container.child`` takes them, dying with the supervisor, confined (``container.confine``:
it cannot signal the supervisor), in a process group of its own, holding no file descriptor of
the supervisor's but its ends of the three pipes (``container.link``). Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["start_child"]

# The child: this package's ``container.child`` with the interpreter running us, started with
# the script folder or working directory left out of the import path (a folder named like one
# of our packages there must not replace it).
_BOOT = "import sys; del sys.path[0]; from container.child import main; sys.exit(main())"
_STOPS = (signal.SIGTERM, signal.SIGINT)


def start_child(
    args: Sequence[str], fds: tuple[int, int, int], env: Mapping[str, str], *, fork: bool
) -> int:
    """Start the evaluation child with ``args`` and the pipes' ``fds`` (named in ``env``);
    its pid. OSError: it could not be started."""
    if fork:
        return _fork_child(args, fds, env)
    return subprocess.Popen(
        [sys.executable, "-c", _BOOT, *args],
        pass_fds=fds,
        env=env,
        process_group=0,
        preexec_fn=_in_child(os.getpid()),
    ).pid


def _in_child(supervisor: int) -> Callable[[], None]:
    """What the child process does between fork and exec: take SIGTERM/SIGINT again, die
    with the supervisor, and lose the means to signal it (``container.confine``)."""
    from container.confine import confine, filter_program
    from container.lifetime import die_with_parent

    program = filter_program(supervisor, os.getpgrp())

    def prepare() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        die_with_parent(supervisor)
        confine(program)

    return prepare


def _fork_child(args: Sequence[str], fds: tuple[int, int, int], env: Mapping[str, str]) -> int:
    """The evaluation child forked from this process, which has it loaded; its pid."""
    prepare = _in_child(os.getpid())
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        for signum in _STOPS:
            signal.signal(signum, signal.SIG_DFL)
        prepare()
        os.setpgid(0, 0)
        for fd in _open_fds():
            if fd > 2 and fd not in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass  # (the listing's own)
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
