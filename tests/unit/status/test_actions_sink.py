"""The actions sink runs a firing's actions off the reporting path, in order, and waits for
them when the verdict is out."""

from __future__ import annotations

import threading
from typing import Any

from evaluator.sinks.actions import ActionsSink
from evaluator.sinks.events import RuleFired


def fired(actions: Any) -> RuleFired:
    return RuleFired(run=None, rule=None, step=0, actions=actions)  # type: ignore[arg-type]


def test_actions_run_in_firing_order_and_wait_sees_them_done() -> None:
    """Three firings' actions run in order, all done when ``wait`` returns."""
    done: list[int] = []
    sink = ActionsSink()
    for i in range(3):
        sink.rule_fired(fired(lambda i=i: done.append(i)))
    sink.wait()
    assert done == [0, 1, 2]


def test_a_hanging_action_never_holds_up_the_firing() -> None:
    """An action stuck on its endpoint leaves ``rule_fired`` (told under the reporter's lock)
    free at once; ``wait`` gives up after its grace, and the action still ends later."""
    release, ended = threading.Event(), threading.Event()

    def stuck() -> None:
        release.wait(30)
        ended.set()

    sink = ActionsSink(grace=0.2)
    sink.rule_fired(fired(stuck))
    sink.rule_fired(fired(None))  # a firing without actions queues nothing
    assert not ended.is_set()
    sink.wait()
    assert not ended.is_set()
    release.set()
    assert ended.wait(10)


def test_a_failing_action_does_not_stop_the_next() -> None:
    """An action that raises is logged; the next firing's actions still run."""
    done: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    sink = ActionsSink()
    sink.rule_fired(fired(broken))
    sink.rule_fired(fired(lambda: done.append("next")))
    sink.wait()
    assert done == ["next"]


def test_the_evaluations_end_waits_for_the_queued_actions() -> None:
    """The evaluation's end (told before the verdict reaches the supervisor, which gives the
    child only seconds after it) returns once the queued actions have run."""
    done: list[str] = []
    sink = ActionsSink()
    sink.rule_fired(fired(lambda: done.append("stop training")))
    sink.evaluation_ending(None)  # type: ignore[arg-type]
    assert done == ["stop training"]
    sink.wait()  # nothing left: returns at once
