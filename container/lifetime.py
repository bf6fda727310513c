"""Every process of a run ends with the run (Linux ``prctl``, through ctypes).

* The supervisor is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process that rule code
  starts and orphans (a double fork, ``setsid`` included) is re-parented to it rather than to
  init, so ``kill_descendants`` finds it through ``/proc`` and kills it before the run's last
  word is written.
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

__all__ = [
    "become_subreaper",
    "descendants",
    "die_with_parent",
    "is_descendant",
    "kill_descendants",
]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

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


def _parents() -> dict[int, int]:
    table: dict[int, int] = {}
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
    """SIGKILL every process below this one, again until none is left (or ``timeout``
    seconds), reaping the ones that were ours; the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in descendants() if not _is_zombie(pid)]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        _reap_all()
        if not alive or time.monotonic() > deadline:
            return killed
        time.sleep(0.02)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
