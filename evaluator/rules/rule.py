"""``Rule``: the base class of every rule, built-in or a user's, with smdebug 1.0.34's API.

A rule subclasses ``Rule``, implements ``invoke_at_step(step)`` (true means "the condition is
met at this step") and, optionally, ``set_required_tensors(step)``::

    from smdebug.rules import Rule

    class LossIsNaN(Rule):
        def __init__(self, base_trial, action_str=None):
            super().__init__(base_trial, action_str)

        def invoke_at_step(self, step):
            return bool(np.isnan(self.base_trial.tensor("loss").value(step)).any())

``invoke_rule`` (``evaluator.rules.invoker``) drives ``Rule.invoke`` over the saved steps.

Unlike smdebug, ``action_str`` is optional: AWS's own examples call
``super().__init__(base_trial)`` and ``super().__init__(base_trial, other_trials=...)``, which
raise TypeError with smdebug 1.0.34.
"""

from __future__ import annotations

import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from evaluator.engine.reads import observe_reads
from evaluator.errors import RuleEvaluationConditionMet
from evaluator.rules.actions import Actions
from evaluator.rules.evidence import Evidence, SelectionHint
from evaluator.rules.required_tensors import RequiredTensors
from evaluator.trial.refresh import no_refresh

__all__ = ["Rule"]


class Rule(ABC):
    """A check evaluated step by step over a base trial (and optionally other trials).

    Attributes, as smdebug: ``base_trial``, ``other_trials`` (as given), ``trials`` (base
    first), ``req_tensors``, ``rule_name`` (the class name), ``report`` and ``logger``.
    ``action_str`` is the rule's ``action_json``; invalid JSON raises ``ConfigurationError``.
    Ours: ``evidence`` (``evaluator.rules.evidence``), where a rule records what it compared,
    so that its verdict can say why; every tensor value the rule reads is counted there too.
    """

    #: True for a rule that records every comparison it makes in ``evidence`` (the built-in
    #: rules): then only comparisons count as having checked something, not mere reads.
    RECORDS_COMPARISONS: bool = False

    #: Ours: whether a met condition carries the actions instead of running them here
    #: (``hand_over_actions``).
    _actions_handed_over: bool = False

    def __init__(
        self,
        base_trial: Any,
        action_str: str | None = None,
        other_trials: Iterable[Any] | None = None,
    ) -> None:
        self.base_trial = base_trial
        self.other_trials = other_trials
        self.trials = [base_trial, *(other_trials or ())]
        self.req_tensors = RequiredTensors(base_trial, other_trials)
        self.rule_name = type(self).__name__
        self.logger = logging.getLogger(f"evaluator.rules.{self.rule_name}")
        self._actions = Actions(action_str, rule_name=self.rule_name)
        self.evidence = Evidence(self.rule_name, base_trial, logger=self.logger)
        if not self.RECORDS_COMPARISONS:  # a user's rule: the report charts what it reads
            self.evidence.watch_reads()
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }

    def set_required_tensors(self, step: int) -> None:  # noqa: B027 (optional, as in smdebug)
        """Declare, with ``self.req_tensors.add``, the values needed at ``step``. Optional."""

    def selection_hints(self) -> list[SelectionHint]:
        """What the rule looks for (its tensor selections and the parameters that set them),
        used to explain a run that found nothing to check. Optional."""
        return []

    @abstractmethod
    def invoke_at_step(self, step: int) -> Any:
        """Evaluate the rule at global ``step``; a true value means the condition is met."""

    def invoke(self, step: int) -> None:
        """Evaluate at ``step`` as smdebug does: wait for the step on the base trial, then,
        without rescanning storage, fetch the required tensors and call ``invoke_at_step``.
        A true result runs the actions (unless handed over: ``hand_over_actions``) and raises
        ``RuleEvaluationConditionMet``."""
        self.base_trial.wait_for_steps([step])
        with no_refresh(self.trials), observe_reads(self.evidence.note_read):
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.evidence.evaluating(None, charted=False)  # the fetch: counted, not charted
            self.req_tensors.fetch()
            self.evidence.evaluating(step)
            met = self.invoke_at_step(step)
        try:
            fired = bool(met)
        except Exception:  # raised again below, as smdebug raises it
            fired = False
        self.evidence.chart_reads(step, fired)
        if met:
            raise self._condition_met(step)

    def invoke_at_end(self) -> int | None:
        """Ours, optional: called once when the data has ended (or ``end_step`` was reached),
        for a rule that judges the final state of training (Confusion judges the trained
        model's predictions, not an untrained one's). Returns the step at which the condition
        is met, or None."""
        return None

    def finish(self) -> None:
        """Run ``invoke_at_end`` as ``invoke`` runs ``invoke_at_step``: a step returned runs
        the actions and raises ``RuleEvaluationConditionMet`` for that step."""
        self.evidence.evaluating(None)
        with no_refresh(self.trials), observe_reads(self.evidence.note_read):
            step = self.invoke_at_end()
        self.evidence.chart_reads()
        if step is not None:
            raise self._condition_met(step)

    def hand_over_actions(self) -> None:
        """Ours: from now on a met condition does not run the rule's actions (``action_str``)
        itself but carries them (``RuleEvaluationConditionMet.actions``) to whoever reports
        it, who runs them once: the evaluation, through its actions sink
        (``evaluator.sinks.actions``), when it reports the firing. Actions the rule's own code
        invokes (``self._actions.invoke()``) run as before."""
        self._actions_handed_over = True

    def _condition_met(self, step: int) -> RuleEvaluationConditionMet:
        """The condition to raise at ``step``, after running the actions (smdebug's order), or
        carrying them once the rule has handed them over."""
        condition = RuleEvaluationConditionMet(self.rule_name, step)
        actions, message = self._actions, str(condition)
        if self._actions_handed_over:
            condition.actions = functools.partial(actions.invoke, message)
        else:
            actions.invoke(message)
        return condition

    def __repr__(self) -> str:
        return (
            f"<{self.rule_name} base_trial={getattr(self.base_trial, 'name', self.base_trial)!r}>"
        )
