"""``Progress``: what a rule's thread tells the reporter as ``invoke_rule`` visits steps (the
step judged, a firing and its reasons, notes), the step watch for ``rule_step_timeout``, and a
warning while a rule has checked nothing yet."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from evaluator.errors import RuleEvaluationConditionMet, SMDebugError
from evaluator.rules.evidence import Evidence
from evaluator.rules.invoker import NullObserver
from evaluator.rules.shown_steps import step_words

if TYPE_CHECKING:
    from evaluator.reporting import StatusReporter

__all__ = ["Progress", "StepWatch"]

log = logging.getLogger("evaluator.evaluation")

_NOTHING_YET_STEPS = 5  # rules that need history (LossNotDecreasing) check nothing at first
_NOTHING_YET_SECONDS = 300.0  # "checked nothing yet" is repeated at most this often


class StepWatch(Protocol):
    """Told when a rule's code starts and ends its work on a step (``None``: the end-of-data
    judgement), e.g. to enforce ``rule_step_timeout`` from outside the process."""

    def begin(self, rule: str, step: int | None) -> None: ...

    def end(self, rule: str) -> None: ...


class Progress(NullObserver):
    """Forwards each visited step to the reporter; while a rule has checked nothing yet, says
    so once, then every ``_NOTHING_YET_SECONDS``."""

    def __init__(
        self,
        reporter: StatusReporter,
        name: str,
        rule: Any,
        evidence: Evidence | None,
        watch: StepWatch | None = None,
    ) -> None:
        self.reporter = reporter
        self.name = name
        self.watch = watch
        self._busy = False
        self.replay_until = reporter.resumed_step(name)  # an earlier attempt evaluated these
        self._replayed_firings = set(reporter.fired_steps(name))
        self.trial = rule.base_trial
        self.evidence = evidence
        self.records = bool(getattr(rule, "RECORDS_COMPARISONS", False))
        self._said_nothing_at: float | None = None
        self._visited = 0
        self._last_step: int | None = None
        self._notes_seen = 0  # notes the rule has made so far (its count)
        self._notes_kept = 0  # of those, the ones Evidence keeps, already reported

    def on_step_start(self, step: int | None) -> None:
        if self.watch is not None:
            self.watch.begin(self.name, step)
            self._busy = True

    def idle(self) -> None:
        """The rule's code is not running (between steps, waiting for data, or ended)."""
        if self._busy and self.watch is not None:
            self.watch.end(self.name)
            self._busy = False

    def _replayed(self, step: int) -> bool:
        return self.replay_until is not None and step <= self.replay_until

    def on_step_evaluated(self, step: int) -> None:
        self.idle()
        if self._replayed(step):
            self._new_notes(step, report=False)  # the earlier attempt logged them
            return
        self.reporter.step_evaluated(self.name, step, newest_step=self.trial.newest_step())
        self._new_notes(step)
        self._visited += 1
        self._last_step = step
        self._nothing_yet(step)

    def on_step_skipped(self, step: int, exc: SMDebugError) -> None:
        self.idle()
        self._visited += 1
        self._last_step = step
        self._nothing_yet(step)

    def on_condition_met(self, step: int, exc: RuleEvaluationConditionMet) -> None:
        self.idle()
        if self._replayed(step) and exc.step in self._replayed_firings:
            return  # recorded by the earlier attempt
        if self._last_step is None or step > self._last_step:
            # A step's own firing; an end-of-data judgement names a step already counted.
            self.reporter.step_evaluated(self.name, step, newest_step=self.trial.newest_step())
            self._last_step = step
        reasons = (
            self.evidence.shown(self.evidence.firings_at(exc.step))
            if self.evidence is not None
            else []
        )
        self.reporter.fired(
            self.name,
            step,
            reasons=reasons,
            actions=getattr(exc, "actions", None),  # the rule's, handed over (Rule.invoke)
        )
        self._new_notes(step)

    def _new_notes(self, step: int, *, report: bool = True) -> None:
        """Firings the rule kept as notes at this step (``ignore_converged``) go to the
        reporter; a counter comparison when there are none."""
        if self.evidence is None or self.evidence.note_count == self._notes_seen:
            return
        notes = self.evidence.notes_after(self._notes_kept)
        self._notes_seen = self.evidence.note_count
        self._notes_kept += len(notes)
        if notes and report:
            self.reporter.noted(self.name, step, notes=self.evidence.shown(notes))

    def _nothing_yet(self, step: int) -> None:
        if (
            self.evidence is None
            or self._visited < _NOTHING_YET_STEPS
            or self.evidence.checked_anything(reads_count=not self.records)
        ):
            return
        now = time.monotonic()
        if self._said_nothing_at is not None and now - self._said_nothing_at < _NOTHING_YET_SECONDS:
            return
        self._said_nothing_at = now
        # Not a warning: a rule that needs history (a loss window) checks nothing at first on
        # a healthy run; only a run that ends so is wrong, and that run ends in Error.
        log.info(
            "rule %s has checked no tensor yet (%d saved step(s) visited, up to %s)"
            "; rules that need history check later: the verdict waits for the end of the data",
            self.name,
            self._visited,
            step_words(self.trial, step),
        )
