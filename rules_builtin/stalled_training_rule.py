"""StalledTrainingRule: no new step saved for ``threshold`` seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.rules.actions import Actions, ClientFactory
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_bool, parse_float
from evaluator.rules.rule import Rule
from rules_builtin.registry import register

__all__ = ["StalledTrainingRule"]


@register
class StalledTrainingRule(Rule):
    """Fires at the newest saved step when no newer step has been saved for ``threshold``
    seconds (default 1800) of wall-clock time, while training has not ended.

    The evaluator invokes a rule only when a step arrives, so the rule waits inside its
    invocation of the newest step: it checks for a newer step every ``poll_seconds`` (1 s)
    and returns, without firing, as soon as one arrives or training ends
    (``training_job_end.ts``, or the evaluator declaring the data complete); after
    ``threshold`` seconds without either it fires. Steps older than the newest are passed
    over at once. Time counts from when this evaluator first saw the newest step, not from
    when it was written, so an evaluator started against an already stalled job fires
    ``threshold`` seconds after it starts. Limitations: it cannot fire before the first step
    is saved (nothing invokes it), and a new step means a new global step (more tensors of a
    step already seen are not progress).

    With ``stop_training_on_fire=True`` it then stops the training job: it lists the
    InProgress training jobs whose name starts with ``training_job_name_prefix`` (required
    then, case-insensitive) and calls StopTrainingJob only if exactly one matches, as the
    ``stoptraining`` action does (which it reuses); AWS errors are logged, never raised. The
    listing happens when the rule first fires, not when it starts, so a rule that never
    fires makes no AWS call.

    ``clock``, ``sleep`` and ``client_factory`` are attributes, not parameters: tests set
    them to a fake clock and stubbed boto3 clients.

    Evidence: each poll while waiting records ``seconds without a new step`` compared with
    ``threshold`` (fires when ``>=``). A rule that never waited (training had ended before
    the evaluator reached the newest step) checked nothing, and the evaluator says so
    (InsufficientInformationForRuleInvocation) rather than NoIssuesFound.
    """

    PARAMETERS = (
        Param(
            "threshold",
            "1800",
            "float",
            "Seconds without a new step, while training runs, before firing.",
        ),
        Param(
            "stop_training_on_fire",
            "False",
            "bool",
            "Stop the training job (the one matching training_job_name_prefix) on firing.",
        ),
        Param(
            "training_job_name_prefix",
            None,
            "str",
            "Prefix of the training job to stop; needed with stop_training_on_fire.",
        ),
    )

    poll_seconds = 1.0

    def __init__(
        self,
        base_trial: Any,
        threshold: str | float = "1800",
        stop_training_on_fire: str | bool = "False",
        training_job_name_prefix: str | None = None,
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.threshold = parse_float(name, "threshold", threshold)
        if not self.threshold > 0:
            raise ConfigurationError(
                f"{name} parameter threshold must be a number of seconds > 0, got {threshold!r}"
            )
        self.stop_training_on_fire = parse_bool(
            name, "stop_training_on_fire", stop_training_on_fire
        )
        prefix = (training_job_name_prefix or "").strip()
        self.training_job_name_prefix = prefix or None
        if self.stop_training_on_fire and not prefix:
            raise ConfigurationError(
                f"{name} parameter training_job_name_prefix must name the training job to stop "
                f"when stop_training_on_fire is true, got {training_job_name_prefix!r}"
            )
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep
        self.client_factory: ClientFactory | None = None
        self._newest: int | None = None
        self._newest_seen_at = 0.0
        self._stopper: Actions | None = None

    def selection_hints(self) -> list[SelectionHint]:
        return [
            SelectionHint(
                "waiting at the newest step (training had ended before it could wait)",
                (),
                None,
                "StalledTrainingRule times the gaps between saved steps while the training job "
                "runs; on a trial whose training has ended there is nothing for it to time",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        self._note_progress()
        if self._newest is not None and self._newest > step:
            return False
        if self._ended():
            return False
        if not self._wait_for_progress(step):
            return False
        if self.stop_training_on_fire:
            self._stop_training(step)
        return True

    def _note_progress(self) -> bool:
        """Remember when a newer step than any seen was first seen; True if there is one."""
        newest = self.base_trial.newest_step()
        if newest is None or (self._newest is not None and newest <= self._newest):
            return False
        self._newest, self._newest_seen_at = newest, self.clock()
        return True

    def _ended(self) -> bool:
        return bool(self.base_trial.loaded_all_steps)

    def _wait_for_progress(self, step: int) -> bool:
        """Wait until a newer step arrives or training ends (False), or until ``threshold``
        seconds have passed since ``step`` was first seen (True)."""
        self.base_trial.start_polling()  # rule invocations do not rescan storage themselves
        while True:
            waited = self.clock() - self._newest_seen_at
            if self.evidence.compare(
                step,
                (),
                quantity="seconds without a new step",
                value=waited,
                parameter="threshold",
                threshold=self.threshold,
                fires_when=">=",
                sentence=lambda: (
                    f"{self.rule_name}: no step after {step} for {waited:g} s "
                    f"(>= threshold {self.threshold:g} s)"
                ),
            ):
                return True
            self.sleep(min(self.poll_seconds, self.threshold - waited))
            if self._note_progress() or self._ended():
                return False

    def _stop_training(self, step: int) -> None:
        if self._stopper is None:
            spec = [{"name": "stoptraining", "training_job_prefix": self.training_job_name_prefix}]
            self._stopper = Actions(
                json.dumps(spec), rule_name=self.rule_name, client_factory=self.client_factory
            )
        self._stopper.invoke(f"{self.rule_name}: training stalled after step {step}")
