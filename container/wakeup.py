"""A file descriptor that is readable while one of some blocked signals is pending (Linux
``signalfd``, through ctypes), so the supervisor can wait on its signals and its child's pipes
in one ``select`` with no timeout, instead of looking every fraction of a second.

Reading the descriptor is not needed and not done: it only says that a signal waits. The
signal itself is still taken with ``sigtimedwait`` (which gives its sender, as the supervisor
needs), and once no signal of the set is pending the descriptor is no longer readable. The
signals must be blocked in the waiting thread (a delivered signal is never pending).

Standard library only, imported by the supervisor before the evaluator.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterable

__all__ = ["SignalWakeup"]

_SIGSET_WORDS = 16  # glibc's sigset_t: 1024 bits


class SignalWakeup:
    """The descriptor (``fd``) for ``signals``; ``open`` gives None where there is none (not
    Linux, no ``signalfd``), and the caller then looks on a timer as before."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, signals: Iterable[int]) -> SignalWakeup | None:
        fd = _signalfd(signals)
        return None if fd is None else cls(fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # (closed already)
            os.close(self.fd)


def _signalfd(signals: Iterable[int]) -> int | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create = libc.signalfd
    except (OSError, AttributeError):  # not Linux, or a libc without it
        return None
    mask = (ctypes.c_ulong * _SIGSET_WORDS)()
    libc.sigemptyset(ctypes.byref(mask))
    for signum in signals:
        if libc.sigaddset(ctypes.byref(mask), ctypes.c_int(int(signum))) != 0:
            return None
    fd = int(create(-1, ctypes.byref(mask), os.O_CLOEXEC | os.O_NONBLOCK))
    return fd if fd >= 0 else None


def drain(signals: Iterable[signal.Signals]) -> int:
    """Take every pending signal of ``signals`` (blocked ones) without looking at them; how
    many were taken."""
    taken = 0
    wanted = set(signals)
    while True:
        try:
            info = signal.sigtimedwait(wanted, 0)
        except InterruptedError:
            continue
        if info is None:
            return taken
        taken += 1
