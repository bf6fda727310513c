"""``Rule``: construction forms, attributes, and the sequence of ``Rule.invoke``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evaluator.errors import (
    ConfigurationError,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from evaluator.rules import Rule


class Never(Rule):
    def invoke_at_step(self, step: int) -> bool:
        return False


class PositionalAction(Rule):
    """A user's rule written for smdebug: action_str passed positionally."""

    def __init__(self, base_trial: Any, action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)

    def invoke_at_step(self, step: int) -> bool:
        return False


class BaseOnly(Rule):
    """A rule written from AWS's examples: ``super().__init__(base_trial)``."""

    def __init__(self, base_trial: Any) -> None:
        super().__init__(base_trial)

    def invoke_at_step(self, step: int) -> bool:
        return False


class Comparing(Rule):
    """A rule over two trials: ``super().__init__(base_trial, other_trials=...)``."""

    def __init__(self, base_trial: Any, other_trial: Any) -> None:
        super().__init__(base_trial, other_trials=[other_trial])

    def invoke_at_step(self, step: int) -> bool:
        return False


class Scripted(Rule):
    """Records what happens during invoke; returns ``answer`` and requires ``needs``."""

    def __init__(
        self,
        base_trial: Any,
        *,
        answer: Any = False,
        needs: list[tuple[str, list[int]]] | None = None,
        action_str: str | None = None,
        other_trials: list[Any] | None = None,
    ) -> None:
        super().__init__(base_trial, action_str, other_trials)
        self.answer = answer
        self.needs = needs or []
        self.events: list[Any] = []

    def set_required_tensors(self, step: int) -> None:
        self.events.append(
            (
                "required",
                step,
                list(self.req_tensors.get_names()),
                [t.dynamic_refresh for t in self.trials],
            )
        )
        for name, steps in self.needs:
            self.req_tensors.add(name, steps)

    def invoke_at_step(self, step: int) -> Any:
        self.events.append(("invoke_at_step", step, [t.dynamic_refresh for t in self.trials]))
        return self.answer


def test_rule_without_invoke_at_step_cannot_be_created(make_trial: Any) -> None:
    """Rule is abstract: a subclass must implement invoke_at_step."""
    with pytest.raises(TypeError):
        Rule(make_trial([0]))  # type: ignore[abstract]


def test_attributes_as_smdebug(make_trial: Any) -> None:
    """trials, base_trial, other_trials, rule_name, report, req_tensors and logger are set."""
    trial = make_trial([0])
    rule = Never(trial)
    assert rule.base_trial is trial and rule.trials == [trial] and rule.other_trials is None
    assert rule.rule_name == "Never"
    assert rule.report == {
        "RuleTriggered": 0,
        "Violations": 0,
        "Details": {},
        "Datapoints": 0,
        "RuleParameters": "",
    }
    assert rule.req_tensors.base_trial is trial
    assert rule.logger.name == "evaluator.rules.Never"


def test_action_str_may_be_passed_positionally_or_omitted(make_trial: Any) -> None:
    """super().__init__(base_trial, action_str) and super().__init__(base_trial) both work."""
    trial = make_trial([0])
    assert len(PositionalAction(trial, None)._actions) == 0
    assert len(PositionalAction(trial, "")._actions) == 0
    assert len(BaseOnly(trial)._actions) == 0


def test_other_trials_by_keyword(make_trial: Any) -> None:
    """super().__init__(base_trial, other_trials=[...]) puts the base trial first in trials."""
    base, other = make_trial([0], name="a"), make_trial([0], name="b")
    rule = Comparing(base, other)
    assert rule.trials == [base, other] and rule.other_trials == [other]
    assert list(rule.req_tensors.get_names(trial=other)) == []


def test_invalid_action_json_fails_the_constructor(make_trial: Any) -> None:
    """Bad action_json is a ConfigurationError naming action_json, raised by the constructor."""
    with pytest.raises(ConfigurationError, match="action_json"):
        PositionalAction(make_trial([0]), "{not json")


def test_invoke_waits_then_runs_without_refresh(
    make_trial: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """invoke waits for the step on the base trial, then clears, requires, fetches and evaluates
    with automatic refreshing off on every trial, and restores it afterwards."""
    base, other = make_trial([0, 1], name="a"), make_trial([0, 1], name="b")
    rule = Scripted(base, needs=[("w", [0])], other_trials=[other])
    waited: list[list[int]] = []
    real_wait = base.wait_for_steps

    def recording_wait(steps: list[int], *args: Any) -> None:
        waited.append(list(steps))
        real_wait(steps, *args)

    monkeypatch.setattr(base, "wait_for_steps", recording_wait)
    rule.invoke(1)
    assert waited == [[1], [0]]  # the step itself, then the union of required steps
    assert rule.events == [
        ("required", 1, [], [False, False]),
        ("invoke_at_step", 1, [False, False]),
    ]
    assert base.dynamic_refresh and other.dynamic_refresh
    rule.invoke(0)
    assert rule.events[-2][2] == []  # requirements of step 1 were cleared before step 0


@pytest.mark.parametrize("answer", [True, 1, np.True_, [0]])
def test_true_result_raises_condition_met(make_trial: Any, answer: Any) -> None:
    """Any true value from invoke_at_step raises RuleEvaluationConditionMet(rule_name, step)."""
    rule = Scripted(make_trial([0, 1]), answer=answer)
    with pytest.raises(RuleEvaluationConditionMet) as caught:
        rule.invoke(1)
    assert (caught.value.rule_name, caught.value.step, caught.value.end_of_rule) == (
        "Scripted",
        1,
        False,
    )
    assert str(caught.value) == (
        "Evaluation of the rule Scripted at step 1 resulted in the condition being met"
    )


@pytest.mark.parametrize("answer", [False, None, 0, [], np.False_])
def test_false_result_returns(make_trial: Any, answer: Any) -> None:
    """A false value from invoke_at_step returns None."""
    assert Scripted(make_trial([0]), answer=answer).invoke(0) is None


def test_actions_run_before_the_condition_is_raised(make_trial: Any) -> None:
    """A firing rule runs its actions, with the condition's text, before raising."""
    rule = Scripted(make_trial([0]), answer=True)
    order: list[str] = []

    class Spy:
        def invoke(self, message: str = "") -> None:
            order.append(message)

    rule._actions = Spy()  # type: ignore[assignment]
    with pytest.raises(RuleEvaluationConditionMet):
        rule.invoke(0)
    assert order == [
        "Evaluation of the rule Scripted at step 0 resulted in the condition being met"
    ]


def test_handed_over_actions_travel_with_the_condition(make_trial: Any) -> None:
    """After ``hand_over_actions`` a firing runs no action itself: the condition carries them,
    to run once with the condition's text; a condition without a firing carries none."""
    rule = Scripted(make_trial([0]), answer=True)
    order: list[str] = []

    class Spy:
        def invoke(self, message: str = "") -> None:
            order.append(message)

    rule._actions = Spy()  # type: ignore[assignment]
    rule.hand_over_actions()
    with pytest.raises(RuleEvaluationConditionMet) as raised:
        rule.invoke(0)
    assert order == [] and raised.value.actions is not None
    raised.value.actions()
    assert order == [str(raised.value)]
    assert RuleEvaluationConditionMet("Scripted", 0).actions is None


def test_missing_required_data_raises_before_invoke_at_step(make_trial: Any) -> None:
    """An unknown required tensor, a step never saved and a tensor missing at a step raise
    smdebug's exceptions from invoke, before invoke_at_step runs."""
    trial = make_trial([0, 2, 3])
    for needs, error in [([("nope", [0])], TensorUnavailable), ([("w", [1])], StepUnavailable)]:
        rule = Scripted(trial, needs=needs)
        with pytest.raises(error):
            rule.invoke(2)
        assert [e[0] for e in rule.events] == ["required"]
    rule = Scripted(trial, needs=[("w", [2])])
    rule.invoke(2)
    assert [e[0] for e in rule.events] == ["required", "invoke_at_step"]


def test_value_missing_at_a_saved_step_is_tensor_unavailable_for_step(tmp_path: Any) -> None:
    """A required tensor not saved at a saved step raises TensorUnavailableForStep."""
    from evaluator.testing import TrialWriter
    from evaluator.trial import create_trial

    writer = TrialWriter(tmp_path)
    writer.write_collections([])
    writer.write_step(0, {"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)})
    writer.write_step(1, {"a": np.zeros(2, np.float32)})
    writer.end_training()
    with create_trial(str(tmp_path)) as trial:
        with pytest.raises(TensorUnavailableForStep):
            Scripted(trial, needs=[("b", [1])]).invoke(1)
