"""Every process of a run ends with the run (Linux ``prctl``, through ctypes).

* Where the supervisor may (root with ``CAP_SYS_ADMIN``, not switched off by
  ``EVALUATOR_PID_NAMESPACE=off``), the evaluation is the first process of a PID namespace of
  its own (``child_in_new_pid_namespace``): when it ends, the kernel kills every process in
  it at once, and no process in it can name a process outside (``kill``, ``F_SETOWN``).
* Everywhere, the supervisor is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process that
  rule code starts and orphans (a double fork, ``setsid`` included) is re-parented to it
  rather than to init, so ``kill_descendants`` kills it before the run's last word is
  written, until ``waitpid`` says no child is left: the kernel's own answer, which a process
  that keeps forking and exiting (a new pid every fraction of a millisecond) cannot dodge.
* The evaluation process dies with the supervisor (``PR_SET_PDEATHSIG`` = SIGKILL), set
  between ``fork`` and ``exec`` and set again after the switch to another user (the kernel
  clears it when credentials change).

Standard library only, imported by the supervisor before anything else it loads.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Mapping

__all__ = [
    "ENV_PID_NAMESPACE",
    "ancestors",
    "become_subreaper",
    "child_in_new_pid_namespace",
    "descendants",
    "die_with_parent",
    "is_descendant",
    "kill_descendants",
    "none_left",
]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWPID = 0x20000000
ENV_PID_NAMESPACE = "EVALUATOR_PID_NAMESPACE"
_MAX_ANCESTORS = 32

_parent: int | None = None  # the supervisor, once ``die_with_parent`` has been called


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans; whether that worked."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(parent: int | None = None) -> None:
    """Be killed (SIGKILL) when the parent ``parent`` (default: the one given before, else the
    current parent) ends; when it is already gone, end now."""
    global _parent
    if parent is not None:
        _parent = parent
    elif _parent is None:
        _parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != _parent:  # the parent died before the setting took hold
        os._exit(128 + signal.SIGKILL)


def rearm() -> None:
    """After a change of user: set the parent-death signal again (the kernel cleared it)."""
    if _parent is not None:
        die_with_parent()


class child_in_new_pid_namespace:  # noqa: N801 - used as ``with``, like a function
    """``with child_in_new_pid_namespace() as made:`` the one process started inside the block
    is the first process (pid 1) of a new PID namespace when ``made`` is true. Outside the
    block this process's later children (and threads, which the kernel refuses while the two
    differ) are in its own namespace again."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        """``environ``: where ``EVALUATOR_PID_NAMESPACE`` is read (default: this process's
        environment)."""
        setting = (os.environ if environ is None else environ).get(ENV_PID_NAMESPACE, "")
        self.wanted = setting.strip().lower() not in ("off", "0", "false", "no")
        self._own: int | None = None

    def __enter__(self) -> bool:
        if not self.wanted:
            return False
        try:
            own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        if _libc_call("unshare", CLONE_NEWPID):
            self._own = own
            return True
        os.close(own)
        return False

    def __exit__(self, *exc: object) -> None:
        own, self._own = self._own, None
        if own is None:
            return
        try:
            if not _libc_call("setns", own, CLONE_NEWPID):
                raise OSError(ctypes.get_errno(), "cannot return to the own PID namespace")
        finally:
            os.close(own)


def _libc_call(name: str, *args: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(getattr(libc, name)(*args)) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def ancestors() -> list[tuple[int, int]]:
    """This process's parent, grandparent, ... up to init: (pid, process group) each; only the
    parent where ``/proc`` is not this namespace's."""
    found: list[tuple[int, int]] = []
    if not _procfs_is_ours():
        return [(os.getppid(), os.getpgid(os.getppid()))] if os.getppid() > 0 else []
    pid = os.getpid()
    while len(found) < _MAX_ANCESTORS:
        fields = _stat(pid)
        if fields is None or int(fields[1]) <= 0:
            return found
        pid = int(fields[1])
        parent = _stat(pid)
        found.append((pid, int(parent[2]) if parent is not None else pid))
        if pid == 1:
            return found
    return found


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _procfs_is_ours() -> bool:
    """Whether ``/proc`` numbers processes as this process does (not so inside a PID namespace
    whose own ``/proc`` is not mounted: there its pids name other processes)."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process, from ``/proc``; empty where ``/proc`` is not this
    process's namespace's (nothing would be found, rather than the wrong processes)."""
    table: dict[int, int] = {}
    if not _procfs_is_ours():
        return table
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(name)] = int(fields[1])
    return table


def descendants(root: int | None = None) -> list[int]:
    """Every process below ``root`` (default: this one), zombies included."""
    top = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [top]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def is_descendant(pid: int, root: int | None = None) -> bool:
    """Whether ``pid`` is a process below ``root`` (default: this one) right now."""
    top = os.getpid() if root is None else root
    table = _parents()
    seen = set()
    while pid in table and pid not in seen and pid > 1:
        seen.add(pid)
        pid = table[pid]
        if pid == top:
            return True
    return False


def kill_descendants(timeout: float = 5.0) -> list[int]:
    """SIGKILL every process below this one and reap them, again until ``waitpid`` says this
    process has no child left (``none_left``) or ``timeout`` seconds have passed; the pids
    killed. Only children are killed at each pass (a killed child's children come to us, a
    subreaper, before it can be reaped), so a process that forks and exits at once is met
    again at the next pass, however fast it changes its pid."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    passes = 0
    while True:
        found = _children() if passes % 16 else descendants()
        passes += 1
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        if none_left() or time.monotonic() > deadline:
            return killed
        if not found:
            time.sleep(0.001)


def none_left() -> bool:
    """Reap every ended child; whether no child (so no process below this one) is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _children() -> list[int]:
    """This process's children, from ``/proc/self/task/*/children`` (else from a scan)."""
    found: list[int] = []
    if not _procfs_is_ours():
        return found
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", "rb") as f:
                found += [int(pid) for pid in f.read().split()]
    except (OSError, ValueError):
        return descendants()
    return found
