"""Refreshing (new steps and tensors seen, ``range_steps`` kept, ``no_refresh`` blocks), the
exceptions for names and steps, and rules: ``Rule.invoke`` without refresh, ``invoke_rule``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.testing import TrialWriter
from tests.compat.smdebug_api.trials import end_job, write_steps


def test_new_steps_and_tensors_are_seen(tmp_path: Path) -> None:
    """Steps written after the trial opened appear in trial and tensor steps; a tensor first
    saved later can be asked for by name."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(8), count=10)
    trial = create_trial(str(tmp_path))
    assert "foo_11" not in trial.tensor_names()
    assert "foo_1" in trial.tensor_names()
    assert len(trial.steps()) == len(trial.tensor("foo_1").steps()) == 8
    write_steps(tmp_path, range(8, 16), count=10, collections=False)
    assert len(trial.tensor("foo_1").steps()) == 16
    assert len(trial.steps()) == 16
    write_steps(tmp_path, [17], count=10, collections=False)
    assert len(trial.steps()) == 17
    write_steps(tmp_path, [18], count=13, collections=False)
    assert trial.tensor("foo_11") is not None


def test_range_steps_holds_after_new_steps(tmp_path: Path) -> None:
    """Steps beyond ``range_steps`` written later are not loaded either."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(8))
    trial = create_trial(str(tmp_path), range_steps=(0, 5))
    assert len(trial.steps()) == 5
    write_steps(tmp_path, range(8, 16), collections=False)
    assert len(trial.steps()) == 5


def test_no_refresh_hides_new_steps_in_every_form(tmp_path: Path) -> None:
    """Inside ``no_refresh`` (a list unpacked with ``as``, a list, a trial) new steps stay
    unseen; outside they appear."""
    from smdebug.analysis.utils import no_refresh
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(8))
    trial = create_trial(str(tmp_path))
    assert len(trial.steps()) == 8
    write_steps(tmp_path, range(8, 16), collections=False)
    with no_refresh([trial]) as [same]:
        assert len(same.tensor("foo_1").steps()) == 8
        assert len(same.steps()) == 8
    with no_refresh([trial]):
        assert len(trial.steps()) == 8
    with no_refresh(trial):
        assert len(trial.tensor("foo_1").steps()) == 8
    assert len(trial.steps()) == 16


def test_exceptions_for_names_and_steps(tmp_path: Path) -> None:
    """Never-saved name: TensorUnavailable; a skipped step: StepUnavailable; a step past the
    newest of a running job: StepNotYetAvailable; and so again after more steps arrive."""
    from smdebug.exceptions import StepNotYetAvailable, StepUnavailable, TensorUnavailable
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(1, 8, 2), count=10)
    trial = create_trial(str(tmp_path))
    assert len(trial.steps()) == 4
    with pytest.raises(TensorUnavailable):
        trial.tensor("bar")
    foo = trial.tensor("foo_1")
    assert foo.value(7) is not None
    with pytest.raises(StepUnavailable):
        foo.value(6)
    with pytest.raises(StepNotYetAvailable):
        foo.value(16)
    write_steps(tmp_path, range(9, 16, 2), count=10, collections=False)
    assert foo.value(9) is not None
    with pytest.raises(StepUnavailable):
        foo.value(8)
    with pytest.raises(StepNotYetAvailable):
        foo.value(24)


def test_a_rule_sees_no_step_beyond_the_one_it_waited_for(tmp_path: Path) -> None:
    """During ``Rule.invoke(step)`` the trial is not rescanned: a step written meanwhile stays
    unseen inside ``invoke_at_step``, and inside ``no_refresh`` too."""
    from smdebug.analysis.utils import no_refresh
    from smdebug.exceptions import StepNotYetAvailable
    from smdebug.rules import Rule
    from smdebug.trials import create_trial

    seen: list[tuple[int, str]] = []

    class PeekAhead(Rule):
        def __init__(self, base_trial: Any) -> None:
            super().__init__(base_trial=base_trial, action_str="")

        def set_required_tensors(self, step: int) -> None:
            for name in self.base_trial.tensor_names():
                self.req_tensors.add(name, steps=[step])

        def invoke_at_step(self, step: int) -> bool:
            for tensor in self.req_tensors.get():
                try:
                    tensor.value(step + 1)
                    seen.append((step, "next"))
                except StepNotYetAvailable:
                    seen.append((step, "not yet"))
            return False

    write_steps(tmp_path, [0, 1], count=1)
    trial = create_trial(str(tmp_path))
    rule = PeekAhead(trial)
    rule.invoke(0)
    rule.invoke(1)
    assert seen == [(0, "next"), (1, "not yet")]
    write_steps(tmp_path, [2], count=1, collections=False)
    with no_refresh(trial):
        rule.invoke_at_step(1)
    assert seen[-1] == (1, "not yet")
    rule.invoke(2)  # waits for step 2: the scan that finds it makes step 2 readable
    assert trial.tensor("foo_0").value(2) is not None


def test_a_rule_that_returns_true_raises_condition_met(tmp_path: Path) -> None:
    """``invoke`` raises RuleEvaluationConditionMet naming the rule and the step."""
    from smdebug.exceptions import RuleEvaluationConditionMet
    from smdebug.rules import Rule
    from smdebug.trials import create_trial

    class Above(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return bool(self.base_trial.tensor("foo_0").value(step).mean() > 2)

    write_steps(tmp_path, range(5), count=1)
    rule = Above(create_trial(str(tmp_path)))
    rule.invoke(2)
    with pytest.raises(RuleEvaluationConditionMet) as raised:
        rule.invoke(3)
    assert raised.value.step == 3
    assert "Above" in str(raised.value)


def test_a_published_style_eval_rule_reads_global_to_mode(tmp_path: Path) -> None:
    """A rule in the manner of AWS's model-pruning example: it keeps EVAL steps through
    ``base_trial._global_to_mode``, reads the EVAL values by mode step, logs through
    ``self.logger`` and fires when the running accuracy falls below the previous one."""
    from smdebug import modes
    from smdebug.exceptions import RuleEvaluationConditionMet
    from smdebug.rules.rule import Rule
    from smdebug.rules.rule_invoker import invoke_rule
    from smdebug.trials import create_trial

    class AccuracyDrop(Rule):
        def __init__(self, base_trial: Any, previous_accuracy: float = 0.9) -> None:
            super().__init__(base_trial)
            self.previous_accuracy = float(previous_accuracy)
            self.correct = self.samples = 0
            self.eval_steps: list[int] = []

        def invoke_at_step(self, step: int) -> bool:
            mode, mode_step = self.base_trial._global_to_mode[step]
            if mode != modes.EVAL:
                return False
            self.eval_steps.append(mode_step)
            guess = self.base_trial.tensor("predictions").value(mode_step, mode=modes.EVAL)
            truth = self.base_trial.tensor("labels").value(mode_step, mode=modes.EVAL)
            self.correct += int(np.sum(np.argmax(guess, axis=1) == truth))
            self.samples += len(truth)
            accuracy = self.correct / self.samples
            self.logger.info("step %s: accuracy %s", step, accuracy)
            return accuracy < self.previous_accuracy

    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("default")])
    labels = np.array([0, 1, 1, 0])
    right = np.eye(2, dtype=np.float32)[labels]
    for s in range(4):
        writer.write_step(s, {"loss": np.float32(1.0)}, mode=modes.TRAIN, mode_step=s)
    for e in range(3):
        guess = right if e < 2 else right[:, ::-1]  # the third EVAL step is all wrong
        writer.write_step(
            4 + e,
            {"predictions": guess, "labels": labels},
            mode=modes.EVAL,
            mode_step=e,
        )
    end_job(tmp_path)
    rule = AccuracyDrop(create_trial(str(tmp_path)))
    with pytest.raises(RuleEvaluationConditionMet) as raised:
        invoke_rule(rule, raise_eval_cond=True)
    assert raised.value.step == 6
    assert rule.eval_steps == [0, 1, 2]
