"""Waits that wake only when something can change: a rule waiting on an idle live trial, and
the run's ``StopEvent`` ending that wait at once (a plain ``threading.Event`` within a second).

Wake-ups are counted as the waiting thread's context switches (``/proc``): a thread asleep on
a condition has none, one that looks at something on a timer has one per look."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.engine.stop import StopEvent, woken_by
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial

pytestmark = pytest.mark.skipif(
    not Path("/proc/thread-self").exists(), reason="counts wake-ups in /proc (Linux)"
)


def switches(thread: threading.Thread) -> int:
    """How often ``thread`` has been switched out so far (each wake-up costs at least one)."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return sum(
        int(line.split()[1])
        for line in status.splitlines()
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
    )


def live_trial(root: Path) -> Any:
    """A trial of steps 0 and 1 that has not ended, polled every few hundredths of a second."""
    writer = TrialWriter(root)
    writer.write_collections([])
    for step in (0, 1):
        writer.write_step(step, {"w": np.zeros(2, np.float32)})
    return create_trial(str(root), poll_interval=0.02, max_poll_interval=0.05)


def count_scans(trial: Any) -> list[None]:
    """A list that grows by one with every scan the trial's cache applies."""
    scans: list[None] = []
    apply = trial._cache.apply

    def counted(*args: Any, **kwargs: Any) -> bool:
        scans.append(None)
        return bool(apply(*args, **kwargs))

    trial._cache.apply = counted
    return scans


def waiting_rule(trial: Any, stop: threading.Event) -> tuple[threading.Thread, list[Any]]:
    """A thread waiting for the step after 1, as a rule's loop does; its answer lands in the
    returned list."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(trial.next_step(1, stop=stop)))
    thread.start()
    return thread, answer


def test_an_idle_live_trial_does_not_wake_its_waiting_rule(tmp_path: Path) -> None:
    """While scans find nothing new (about twenty a second here), the waiting rule's thread
    sleeps through them all; the stop then ends its wait at once."""
    trial = live_trial(tmp_path)
    stop = StopEvent()
    try:
        scans = count_scans(trial)
        thread, answer = waiting_rule(trial, stop)
        time.sleep(0.3)  # in its wait
        before, scanned = switches(thread), len(scans)
        time.sleep(1.0)
        woke = switches(thread) - before
        assert len(scans) - scanned >= 5  # the trial was polled all along
        stopped = time.monotonic()
        stop.set()
        thread.join(timeout=5)
        assert woke == 0
        assert not thread.is_alive() and answer == [None]
        assert time.monotonic() - stopped < 0.5
    finally:
        stop.set()
        trial.close()


def test_a_new_step_wakes_the_waiting_rule(tmp_path: Path) -> None:
    """The scan that applies a new step wakes the waiter, which answers with it."""
    trial = live_trial(tmp_path)
    stop = StopEvent()
    try:
        thread, answer = waiting_rule(trial, stop)
        time.sleep(0.2)
        TrialWriter(tmp_path).write_step(5, {"w": np.ones(2, np.float32)})
        thread.join(timeout=5)
        assert answer == [5]
    finally:
        stop.set()
        trial.close()


def test_a_plain_event_still_ends_the_wait_within_a_second(tmp_path: Path) -> None:
    """A stop that cannot be heard (a plain ``threading.Event``) is looked at every second."""
    trial = live_trial(tmp_path)
    stop = threading.Event()
    try:
        thread, answer = waiting_rule(trial, stop)
        time.sleep(0.2)
        stopped = time.monotonic()
        stop.set()
        thread.join(timeout=5)
        assert answer == [None] and time.monotonic() - stopped < 1.5
    finally:
        trial.close()


def test_a_stop_event_calls_its_listeners_once_set_and_forgets_removed_ones() -> None:
    """``listen`` hears the stop when it is set (at once when it already is); what it returns
    removes the listener."""
    stop = StopEvent()
    heard: list[str] = []
    remove = stop.listen(lambda: heard.append("a"))
    stop.listen(lambda: heard.append("b"))
    remove()
    stop.set()
    stop.listen(lambda: heard.append("c"))
    assert heard == ["b", "c"] and stop.is_set()


def test_woken_by_notifies_the_condition_only_for_a_stop_event() -> None:
    """Inside ``woken_by``, setting the stop wakes a waiter on the condition; it says whether
    it can (a plain Event cannot), and after it the stop notifies nothing."""
    condition = threading.Condition(threading.RLock())
    stop = StopEvent()
    with woken_by(threading.Event(), condition) as plain:
        assert plain is False
    with woken_by(stop, condition) as heard, condition:
        threading.Timer(0.1, stop.set).start()
        started = time.monotonic()
        assert heard and condition.wait(5)
        assert time.monotonic() - started < 2
    assert stop._listeners == {}
