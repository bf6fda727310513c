"""``invoke_rule``: run a rule over the saved steps of its base trial.

Exception handling follows smdebug 1.0.34's ``invoke_rule``:

* ``TensorUnavailableForStep``, ``StepUnavailable`` and ``TensorUnavailable`` skip the step
  (logged at debug level);
* ``RuleEvaluationConditionMet`` is re-raised when ``raise_eval_cond``; otherwise it is logged,
  and the run ends if the exception says ``end_of_rule``;
* ``NoMoreProfilerData`` ends the run; anything else propagates (as ``RuleFailed``, naming the
  step, when the caller asks with ``wrap_errors``).

Four differences, all additive:

* steps are visited as they are saved (``Trial.next_step``), not every integer from
  ``start_step`` on, so steps that were never saved are not "skipped" one by one;
* the end of the data is a normal return, not ``NoMoreData`` escaping (a ``NoMoreData`` the
  rule itself raises ends the run the same way);
* the call returns an ``InvokeResult``, reports each step to an optional ``RuleObserver``,
  ends as ``stop`` is set (a ``StopEvent`` wakes a wait for data at once; a plain
  ``threading.Event`` is seen within a second), and can end at the first firing
  (``continue_after_fire=False``);
* when the data ends (or ``end_step`` is reached), a rule's ``finish()`` (``Rule.finish``:
  ``invoke_at_end``, for rules that judge the final state of training) runs once; a firing
  there is reported like any other.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

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
from evaluator.rules.shown_steps import condition_words

__all__ = ["InvokeResult", "NullObserver", "RuleObserver", "Termination", "invoke_rule"]

log = logging.getLogger("evaluator.rules")

SKIPPING = (TensorUnavailableForStep, StepUnavailable, TensorUnavailable)


class Termination(str, enum.Enum):
    """Why ``invoke_rule`` returned."""

    END_OF_DATA = "end_of_data"  # training ended and every saved step was visited
    END_STEP = "end_step"  # the next saved step is at or past end_step
    STOPPED = "stopped"  # the stop event was set
    END_OF_RULE = "end_of_rule"  # RuleEvaluationConditionMet(end_of_rule=True)
    CONDITION_MET = "condition_met"  # the rule fired and continue_after_fire was False

    def __str__(self) -> str:
        return self.value


class RuleObserver(Protocol):
    """Told about every step ``invoke_rule`` visits: exactly one of these calls per step (none
    when the rule raised). An observer may also have ``on_step_start(step)``, called before the
    rule's code runs at a step, and with ``None`` before the end-of-data judgement
    (``NullObserver`` has it)."""

    def on_step_evaluated(self, step: int) -> None:
        """The rule ran at ``step`` and its condition was not met."""

    def on_step_skipped(self, step: int, exc: SMDebugError) -> None:
        """The step was skipped: the data the rule needed was missing (``exc`` says what)."""

    def on_condition_met(self, step: int, exc: RuleEvaluationConditionMet) -> None:
        """The rule fired at ``step`` (``exc.step`` is the step the rule reported)."""


class NullObserver:
    """A ``RuleObserver`` that ignores everything; subclass it to override only some calls."""

    def on_step_start(self, step: int | None) -> None:
        pass

    def on_step_evaluated(self, step: int) -> None:
        pass

    def on_step_skipped(self, step: int, exc: SMDebugError) -> None:
        pass

    def on_condition_met(self, step: int, exc: RuleEvaluationConditionMet) -> None:
        pass


@dataclass(frozen=True)
class InvokeResult:
    """What one ``invoke_rule`` run did."""

    ended_by: Termination
    steps_evaluated: int  # steps where the rule ran to the end (fired or not)
    steps_skipped: int
    fired_steps: tuple[int, ...]
    last_step: int | None  # the last step visited, None if there was none


@dataclass
class _Tally:
    evaluated: int = 0
    skipped: int = 0
    fired: list[int] = field(default_factory=list)
    last_step: int | None = None

    def result(self, ended_by: Termination) -> InvokeResult:
        return InvokeResult(
            ended_by, self.evaluated, self.skipped, tuple(self.fired), self.last_step
        )


def invoke_rule(
    rule_obj: Any,
    start_step: int | None = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
    *,
    observer: RuleObserver | None = None,
    stop: threading.Event | None = None,
    continue_after_fire: bool = True,
    wrap_errors: bool = False,
) -> InvokeResult:
    """Call ``rule_obj.invoke(step)`` for each saved global step in ``[start_step, end_step)``
    of ``rule_obj.base_trial``, waiting for new steps while training runs.

    Returns when the data ends, ``end_step`` is reached, ``stop`` is set, or the rule ends
    itself; see the module docstring for the exceptions. With ``wrap_errors``, an exception the
    rule raises at a step escapes as ``RuleFailed`` (the step, and the exception as cause)."""
    trial = rule_obj.base_trial
    watcher: RuleObserver = observer if observer is not None else NullObserver()
    found = getattr(watcher, "on_step_start", None)
    starts: Callable[[int | None], None] = found if callable(found) else _no_start
    tally = _Tally()
    start = start_step or 0
    _expect_steps(rule_obj, trial, start, end_step)
    step = trial.next_step(start - 1 if start > 0 else None, end_step=end_step, stop=stop)
    while step is not None:
        if stop is not None and stop.is_set():
            return tally.result(Termination.STOPPED)
        tally.last_step = step
        try:
            ended = _invoke_at(
                rule_obj, step, tally, watcher, starts, raise_eval_cond, continue_after_fire
            )
        except RuleEvaluationConditionMet:
            raise  # raise_eval_cond: the firing itself, not a failure
        except BaseException as e:
            # With wrap_errors, whatever the rule raised (SystemExit, KeyboardInterrupt and
            # GeneratorExit included) is the rule's failure, never the process's.
            if wrap_errors:
                raise RuleFailed(step, e) from e
            raise  # smdebug's behaviour: the rule's exception as it is
        if ended is not None:
            return tally.result(ended)
        step = trial.next_step(step, end_step=end_step, stop=stop)
    ended_by = _why_no_step(trial, end_step, stop)
    if ended_by in (Termination.END_OF_DATA, Termination.END_STEP):
        try:
            _finish(rule_obj, tally, watcher, starts, raise_eval_cond)
        except RuleEvaluationConditionMet:
            raise
        except BaseException as e:
            if wrap_errors and tally.last_step is not None:
                raise RuleFailed(tally.last_step, e) from e
            raise
    return tally.result(ended_by)


def _expect_steps(rule_obj: Any, trial: Any, start: int, end_step: int | None) -> None:
    """Tell the rule's evidence (ours; a rule without one is left alone) how to count the
    trial's steps it is about to evaluate, as far as the trial knows them now: a rule whose
    reads are charted counts them, and its read charts then sample a finished run's steps
    without holding the reads of steps they would let go. Never raises: the charts are a
    help."""
    expect = getattr(getattr(rule_obj, "evidence", None), "expect_steps", None)
    if not callable(expect):
        return

    def count() -> int:
        return sum(1 for s in trial.steps() if s >= start and (end_step is None or s < end_step))

    try:
        expect(count)
    except Exception:  # a stand-in trial, or one that cannot say yet
        log.debug("rule %s: no step count for its read charts", _name(rule_obj), exc_info=True)


def _finish(
    rule_obj: Any,
    tally: _Tally,
    watcher: RuleObserver,
    starts: Callable[[int | None], None],
    raise_eval_cond: bool,
) -> None:
    """The end-of-data judgement (``Rule.finish``) of a rule that has one; a firing there
    counts as a firing at the step the rule names."""
    finish = getattr(rule_obj, "finish", None)
    if not callable(finish):
        return
    starts(None)
    try:
        finish()
    except RuleEvaluationConditionMet as e:
        tally.fired.append(e.step)
        watcher.on_condition_met(e.step, e)
        if raise_eval_cond:
            raise
        log.info("%s", condition_words(getattr(rule_obj, "base_trial", None), e))


def _invoke_at(
    rule_obj: Any,
    step: int,
    tally: _Tally,
    watcher: RuleObserver,
    starts: Callable[[int | None], None],
    raise_eval_cond: bool,
    continue_after_fire: bool,
) -> Termination | None:
    """Invoke the rule at one step; the reason to stop, or None to go on."""
    starts(step)
    try:
        rule_obj.invoke(step)
    except SKIPPING as e:
        log.debug("rule %s: step %s skipped: %s", _name(rule_obj), step, e)
        tally.skipped += 1
        watcher.on_step_skipped(step, e)
        return None
    except RuleEvaluationConditionMet as e:
        tally.evaluated += 1
        tally.fired.append(e.step)
        watcher.on_condition_met(step, e)
        if raise_eval_cond:
            raise
        log.info("%s", condition_words(getattr(rule_obj, "base_trial", None), e))
        if e.end_of_rule:
            return Termination.END_OF_RULE
        return None if continue_after_fire else Termination.CONDITION_MET
    except (NoMoreData, NoMoreProfilerData) as e:
        log.debug("rule %s: data ended at step %s: %s", _name(rule_obj), step, e)
        return Termination.END_OF_DATA
    tally.evaluated += 1
    watcher.on_step_evaluated(step)
    return None


def _no_start(step: int | None) -> None:
    """``on_step_start`` of an observer that has none."""


def _why_no_step(trial: Any, end_step: int | None, stop: threading.Event | None) -> Termination:
    """``next_step`` returned None: tell a stop, the end_step and the end of the data apart."""
    if stop is not None and stop.is_set():
        return Termination.STOPPED
    if end_step is None:
        return Termination.END_OF_DATA
    if not trial.loaded_all_steps:
        return Termination.END_STEP  # a running trial: only end_step ends the walk
    steps = trial.steps(show_incomplete_steps=True)
    return Termination.END_STEP if steps and steps[-1] >= end_step else Termination.END_OF_DATA


def _name(rule_obj: Any) -> str:
    return str(getattr(rule_obj, "rule_name", type(rule_obj).__name__))
