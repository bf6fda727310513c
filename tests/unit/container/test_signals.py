"""The stop signals' handler: the first SIGTERM/SIGINT sets the run's ``StopEvent`` and is
the exit code's; a second one, even delivered while the first is still setting the event (a
signal handler runs between any two bytecodes, inside the first handler too), changes
nothing and never waits."""

from __future__ import annotations

import signal
import threading
from typing import Any

from container.signals import StopSignals
from evaluator.engine.stop import StopEvent


def test_a_second_signal_inside_the_first_handlers_set_does_not_hang() -> None:
    """A SIGINT that arrives while the SIGTERM's handler holds the event's own lock (here: as
    it notifies the event's waiters) returns at once; the stop stays SIGTERM's."""
    signals = StopSignals(raise_in_main=False)
    assert isinstance(signals.stop, StopEvent)
    event: Any = signals.stop
    notify_all = event._cond.notify_all

    def notify_with_a_second_signal() -> None:
        signals._handle(signal.SIGINT, None)  # (before: set() again, on the lock it holds)
        notify_all()

    event._cond.notify_all = notify_with_a_second_signal
    handler = threading.Thread(target=signals._handle, args=(signal.SIGTERM, None), daemon=True)
    handler.start()
    handler.join(timeout=5)
    assert not handler.is_alive()
    assert signals.stop.is_set() and signals.signum == signal.SIGTERM
