"""How long the supervisor's wait may last (``container.supervisor``): no limit while nothing
is due, until the next deadline while one runs, its old 0.2 s look once one has passed."""

from __future__ import annotations

import os

import pytest

from container import supervisor
from container.supervisor import _Supervisor, _wait


def _sup(**state: object) -> _Supervisor:
    s = _Supervisor()
    s.state.update(state)
    return s


def test_an_idle_run_waits_with_no_limit() -> None:
    """No stop, no step limit, no verdict: the wait has no timeout (nothing but the pipes and
    the signals wake it)."""
    assert _sup()._wait_seconds(100.0, None) is None


def test_a_rule_step_under_a_limit_wakes_it_when_the_limit_runs_out() -> None:
    """A rule in its step since t=95 under a 10 s limit: due at 105; a waiting rule last heard
    at 96 gets the heartbeats' slack too."""
    s = _sup(step_timeout=10)
    s.busy["A"] = (3, 95.0)
    assert s._wait_seconds(100.0, None) == pytest.approx(5.0)
    s.busy.clear()
    s.waiting["A"] = (3, 96.0)
    assert s._wait_seconds(100.0, None) == pytest.approx(6.0 + supervisor._WAIT_SLACK)


def test_a_step_with_no_limit_sets_no_deadline() -> None:
    """Steps are only timed under rule_step_timeout."""
    s = _sup(step_timeout=None)
    s.busy["A"] = (3, 0.0)
    assert s._wait_seconds(100.0, None) is None


def test_the_nearest_of_stop_grace_verdict_grace_and_drain_decides() -> None:
    """Each deadline counts; the soonest wins."""
    s = _sup()
    s.stop_deadline = 108.0
    assert s._wait_seconds(100.0, None) == pytest.approx(8.0)
    s.verdict_at = 98.0
    assert s._wait_seconds(100.0, None) == pytest.approx(supervisor.VERDICT_GRACE - 2.0)
    assert s._wait_seconds(100.0, 99.5) == pytest.approx(supervisor.DRAIN_SECONDS - 0.5)


def test_a_passed_deadline_looks_again_every_tick_not_in_a_busy_loop() -> None:
    """Once the stop's grace is over (the kill done), the wait is the old look, never 0."""
    s = _sup()
    s.stop_deadline = 90.0
    assert s._wait_seconds(100.0, None) == supervisor._TICK


def test_an_overrun_stops_timing_the_steps() -> None:
    """After the kill for an overrun, the steps' deadlines no longer count."""
    s = _sup(step_timeout=1)
    s.busy["A"] = (3, 0.0)
    s.overrun = ("A", 3, 1.0)
    assert s._wait_seconds(100.0, None) is None


def test_without_a_wakeup_descriptor_the_wait_is_the_tick_at_most() -> None:
    """Where there is no signalfd, a wait with no limit still ends after the tick, and the
    readable pipes are returned."""
    r, w = os.pipe()
    try:
        assert _wait({r: "control"}, None, None) == []
        os.write(w, b"x")
        assert _wait({r: "control"}, None, None) == [r]
    finally:
        os.close(r)
        os.close(w)
