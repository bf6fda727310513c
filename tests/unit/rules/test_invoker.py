"""``invoke_rule``: saved steps only, smdebug's exception semantics, clean ends, stop, observer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import (
    NoMoreData,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    RuleFailed,
    SMDebugError,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from evaluator.modes import ModeKeys
from evaluator.rules import InvokeResult, Rule, Termination, invoke_rule
from evaluator.testing import TrialWriter

SAVED = [0, 2, 3, 5]


class Body(Rule):
    """invoke_at_step runs ``body(step)`` (False by default) and records the step."""

    def __init__(
        self,
        base_trial: Any,
        body: Callable[[int], Any] = lambda step: False,
        needs: Callable[[int], list[tuple[str, list[int]]]] | None = None,
    ) -> None:
        super().__init__(base_trial)
        self.body = body
        self.needs = needs
        self.visited: list[int] = []

    def set_required_tensors(self, step: int) -> None:
        for name, steps in self.needs(step) if self.needs else []:
            self.req_tensors.add(name, steps)

    def invoke_at_step(self, step: int) -> Any:
        self.visited.append(step)
        return self.body(step)


class Log:
    """A RuleObserver that writes every call down."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, Any]] = []

    def on_step_evaluated(self, step: int) -> None:
        self.calls.append(("evaluated", step, None))

    def on_step_skipped(self, step: int, exc: SMDebugError) -> None:
        self.calls.append(("skipped", step, type(exc).__name__))

    def on_condition_met(self, step: int, exc: RuleEvaluationConditionMet) -> None:
        self.calls.append(("met", step, exc.step))


def raise_at(steps: dict[int, Exception]) -> Callable[[int], bool]:
    def body(step: int) -> bool:
        if step in steps:
            raise steps[step]
        return False

    return body


def test_visits_saved_steps_then_returns_at_the_end(make_trial: Any) -> None:
    """Steps {0,2,3,5} give invoke_at_step 0, 2, 3, 5, then a clean return (smdebug: NoMoreData)."""
    rule = Body(make_trial(SAVED))
    result = invoke_rule(rule)
    assert rule.visited == SAVED
    assert result == InvokeResult(Termination.END_OF_DATA, 4, 0, (), 5)
    assert result.ended_by == "end_of_data"


@pytest.mark.parametrize(
    ("start", "end", "visited", "ended_by"),
    [
        (2, 5, [2, 3], Termination.END_STEP),
        (1, None, [2, 3, 5], Termination.END_OF_DATA),
        (None, 3, [0, 2], Termination.END_STEP),
        (0, 6, [0, 2, 3, 5], Termination.END_OF_DATA),
        (0, 100, [0, 2, 3, 5], Termination.END_OF_DATA),
        (0, 0, [], Termination.END_STEP),
        (6, None, [], Termination.END_OF_DATA),
    ],
)
def test_start_step_inclusive_end_step_exclusive(
    make_trial: Any, start: int | None, end: int | None, visited: list[int], ended_by: Termination
) -> None:
    """The first saved step >= start_step is visited first; end_step itself is not visited."""
    rule = Body(make_trial(SAVED))
    result = invoke_rule(rule, start, end)
    assert rule.visited == visited
    assert result.ended_by == ended_by
    assert result.last_step == (visited[-1] if visited else None)


def test_end_step_on_a_running_trial_ends_without_waiting(make_trial: Any) -> None:
    """On a trial still being written, reaching end_step ends the run at once."""
    rule = Body(make_trial([0, 1, 2], ended=False))
    started = time.monotonic()
    assert invoke_rule(rule, end_step=2).ended_by == Termination.END_STEP
    assert rule.visited == [0, 1] and time.monotonic() - started < 2


@pytest.mark.parametrize(
    "error",
    [TensorUnavailableForStep("w", 2), StepUnavailable(2, ModeKeys.GLOBAL), TensorUnavailable("w")],
)
def test_missing_data_skips_the_step(make_trial: Any, error: Exception) -> None:
    """TensorUnavailableForStep, StepUnavailable and TensorUnavailable skip the step and go on."""
    log = Log()
    rule = Body(make_trial(SAVED), raise_at({2: error}))
    result = invoke_rule(rule, observer=log)
    assert rule.visited == SAVED
    assert (result.steps_evaluated, result.steps_skipped) == (3, 1)
    assert ("skipped", 2, type(error).__name__) in log.calls


def test_required_tensors_missing_skip_and_running_past_the_end_ends(make_trial: Any) -> None:
    """A required tensor or step that is missing skips the step before invoke_at_step; requiring a
    step past the end of an ended trial (NoMoreData) ends the run cleanly."""

    def needs(step: int) -> list[tuple[str, list[int]]]:
        return {0: [("w", [1])], 2: [("nope", [2])], 3: [("w", [3])], 5: [("w", [6])]}[step]

    log = Log()
    rule = Body(make_trial(SAVED), needs=needs)
    result = invoke_rule(rule, observer=log)
    assert rule.visited == [3]
    assert log.calls == [
        ("skipped", 0, "StepUnavailable"),
        ("skipped", 2, "TensorUnavailable"),
        ("evaluated", 3, None),
    ]
    assert result == InvokeResult(Termination.END_OF_DATA, 1, 2, (), 5)


def test_firing_is_logged_and_the_run_goes_on(make_trial: Any) -> None:
    """Each true invoke_at_step is a firing; by default the run continues to the end."""
    log = Log()
    result = invoke_rule(Body(make_trial(SAVED), lambda s: s in (2, 5)), observer=log)
    assert result.fired_steps == (2, 5) and result.ended_by == Termination.END_OF_DATA
    assert log.calls == [
        ("evaluated", 0, None),
        ("met", 2, 2),
        ("evaluated", 3, None),
        ("met", 5, 5),
    ]


def test_raise_eval_cond_reraises_the_first_firing(make_trial: Any) -> None:
    """With raise_eval_cond the condition escapes at the first firing step."""
    rule = Body(make_trial(SAVED), lambda s: s >= 2)
    with pytest.raises(RuleEvaluationConditionMet) as caught:
        invoke_rule(rule, raise_eval_cond=True)
    assert (caught.value.rule_name, caught.value.step) == ("Body", 2)
    assert rule.visited == [0, 2]


def test_continue_after_fire_false_ends_at_the_first_firing(make_trial: Any) -> None:
    """continue_after_fire=False returns at the first firing, without raising."""
    rule = Body(make_trial(SAVED), lambda s: s >= 2)
    result = invoke_rule(rule, continue_after_fire=False)
    assert result == InvokeResult(Termination.CONDITION_MET, 2, 0, (2,), 2)


def test_end_of_rule_ends_the_run(make_trial: Any) -> None:
    """A RuleEvaluationConditionMet with end_of_rule=True ends the run after it is recorded."""
    rule = Body(
        make_trial(SAVED), raise_at({3: RuleEvaluationConditionMet("Body", 3, end_of_rule=True)})
    )
    result = invoke_rule(rule)
    assert rule.visited == [0, 2, 3]
    assert result == InvokeResult(Termination.END_OF_RULE, 3, 0, (3,), 3)


@pytest.mark.parametrize("error", [NoMoreData(3, ModeKeys.GLOBAL, 2), NoMoreProfilerData(123)])
def test_no_more_data_from_the_rule_ends_cleanly(make_trial: Any, error: Exception) -> None:
    """NoMoreData or NoMoreProfilerData raised inside the rule ends the run as the end of data."""
    rule = Body(make_trial(SAVED), raise_at({3: error}))
    assert invoke_rule(rule).ended_by == Termination.END_OF_DATA
    assert rule.visited == [0, 2, 3]


def test_other_exceptions_propagate(make_trial: Any) -> None:
    """Any other exception, such as KeyError, escapes invoke_rule; the observer is not told."""
    log = Log()
    rule = Body(make_trial(SAVED), raise_at({2: KeyError("dt/int16")}))
    with pytest.raises(KeyError):
        invoke_rule(rule, observer=log)
    assert log.calls == [("evaluated", 0, None)]


def test_the_rule_exception_escapes_unchanged(make_trial: Any) -> None:
    """By default the rule's own exception object escapes, with nothing added to it."""
    error = KeyError("dt/int16")
    with pytest.raises(KeyError) as caught:
        invoke_rule(Body(make_trial(SAVED), raise_at({2: error})))
    assert caught.value is error and vars(error) == {}


def test_wrap_errors_names_the_step(make_trial: Any) -> None:
    """With wrap_errors, an exception raised at a step escapes as RuleFailed(step), the rule's
    exception as its cause; a firing re-raised by raise_eval_cond is not wrapped."""
    error = KeyError("dt/int16")
    with pytest.raises(RuleFailed) as caught:
        invoke_rule(Body(make_trial(SAVED), raise_at({3: error})), wrap_errors=True)
    assert (caught.value.step, caught.value.error, caught.value.__cause__) == (3, error, error)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(
            Body(make_trial(SAVED), lambda step: True), raise_eval_cond=True, wrap_errors=True
        )


def test_stop_ends_a_wait_for_data_within_seconds(make_trial: Any) -> None:
    """Setting stop while the rule waits for the next step of a live trial ends the run quickly."""
    rule = Body(make_trial([0, 1], ended=False))
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        result = invoke_rule(rule, stop=stop)
    finally:
        timer.cancel()
    assert result.ended_by == Termination.STOPPED and rule.visited == [0, 1]
    assert (
        time.monotonic() - started < 7
    )  # worst case: one slowest poll (max_poll_interval 4 s) + 1


def test_stop_already_set_visits_nothing(make_trial: Any) -> None:
    """A stop set before the run starts ends it before the first step."""
    stop = threading.Event()
    stop.set()
    rule = Body(make_trial(SAVED))
    assert invoke_rule(rule, stop=stop).ended_by == Termination.STOPPED
    assert rule.visited == []


def test_steps_arriving_while_waiting_are_visited(tmp_path: Path) -> None:
    """On a live trial the run waits for new steps and ends once training ends."""
    from evaluator.trial import create_trial

    writer = TrialWriter(tmp_path)
    writer.write_collections([])
    writer.write_step(0, {"w": np.zeros(2, np.float32)})

    def grow() -> None:
        time.sleep(0.3)
        writer.write_step(4, {"w": np.ones(2, np.float32)})
        time.sleep(0.3)
        writer.end_training()

    with create_trial(str(tmp_path), poll_interval=0.05, max_poll_interval=0.2) as trial:
        thread = threading.Thread(target=grow)
        thread.start()
        rule = Body(trial)
        result = invoke_rule(rule)
        thread.join()
    assert rule.visited == [0, 4] and result.ended_by == Termination.END_OF_DATA


def test_observer_hears_exactly_one_call_per_visited_step(make_trial: Any) -> None:
    """Every visited step produces one observer call: evaluated, skipped or met, in order."""
    log = Log()
    body = raise_at({3: TensorUnavailableForStep("w", 3)})
    result = invoke_rule(Body(make_trial(SAVED), lambda s: s == 5 or body(s)), observer=log)
    assert [(c[0], c[1]) for c in log.calls] == [
        ("evaluated", 0),
        ("evaluated", 2),
        ("skipped", 3),
        ("met", 5),
    ]
    assert result == InvokeResult(Termination.END_OF_DATA, 3, 1, (5,), 5)


class AtEnd(Body):
    """invoke_at_end returns ``verdict`` (a step, or None) once the data has ended."""

    def __init__(self, base_trial: Any, verdict: int | None) -> None:
        super().__init__(base_trial)
        self.verdict = verdict
        self.ends = 0

    def invoke_at_end(self) -> int | None:
        self.ends += 1
        return self.verdict


def test_end_of_data_judgement_fires_at_the_step_it_names(make_trial: Any) -> None:
    """A rule judging the final state fires once, at the step invoke_at_end returns."""
    rule, log = AtEnd(make_trial(SAVED), 3), Log()
    result = invoke_rule(rule, observer=log)
    assert (rule.ends, result.fired_steps, result.ended_by) == (1, (3,), Termination.END_OF_DATA)
    assert log.calls[-1] == ("met", 3, 3)


def test_end_of_data_judgement_that_passes_fires_nothing(make_trial: Any) -> None:
    """invoke_at_end returning None leaves the run without a firing."""
    rule = AtEnd(make_trial(SAVED), None)
    assert invoke_rule(rule).fired_steps == () and rule.ends == 1


def test_end_of_data_judgement_raises_when_asked(make_trial: Any) -> None:
    """With raise_eval_cond the end-of-data firing is raised, as a step's would be."""
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(AtEnd(make_trial(SAVED), 5), raise_eval_cond=True)


def test_no_end_of_data_judgement_after_a_stop(make_trial: Any) -> None:
    """A stopped run never runs invoke_at_end (a stop is not the end of the data)."""
    stop = threading.Event()
    stop.set()
    rule = AtEnd(make_trial(SAVED), 3)
    assert invoke_rule(rule, stop=stop).ended_by == Termination.STOPPED and rule.ends == 0
