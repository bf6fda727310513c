"""The supervisor's wakeup descriptor (``container.wakeup``): readable exactly while one of its
blocked signals is pending, so one ``select`` waits on signals and pipes with no timer."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator

import pytest

from container.wakeup import SignalWakeup, drain

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signalfd is Linux's")

SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


@pytest.fixture
def wakeup() -> Iterator[SignalWakeup]:
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    opened = SignalWakeup.open(SIGNALS)
    assert opened is not None
    try:
        yield opened
    finally:
        drain(SIGNALS)
        opened.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def _send_here(signum: int) -> None:
    """The signal to this thread, where it is blocked (the test runner may run tests in a
    thread other than the main one, where it would not be)."""
    signal.pthread_kill(threading.get_ident(), signum)


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_the_descriptor_is_readable_only_while_a_signal_waits(wakeup: SignalWakeup) -> None:
    """Nothing pending: not readable; a blocked signal sent: readable; taken: not again."""
    assert not _readable(wakeup.fd)
    _send_here(signal.SIGUSR1)
    assert _readable(wakeup.fd)
    assert drain(SIGNALS) == 1
    assert not _readable(wakeup.fd)


def test_a_pending_signal_keeps_its_sender_for_sigtimedwait(wakeup: SignalWakeup) -> None:
    """Waking on the descriptor takes nothing: sigtimedwait still gets the signal and who
    sent it (the supervisor's sender check)."""
    _send_here(signal.SIGUSR2)
    assert select.select([wakeup.fd], [], [], 5)[0] == [wakeup.fd]
    info = signal.sigtimedwait(SIGNALS, 0)
    assert info is not None
    assert (info.si_signo, info.si_pid) == (signal.SIGUSR2, os.getpid())


def test_a_signal_outside_the_set_does_not_wake_it(wakeup: SignalWakeup) -> None:
    """Another blocked signal pending leaves the descriptor quiet."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH})
    try:
        _send_here(signal.SIGWINCH)
        assert not _readable(wakeup.fd)
    finally:
        drain((signal.SIGWINCH,))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGWINCH})
