"""Rule actions as a sink: the StopTraining / Email / SMS actions of a rule's ``action_json``
(``evaluator.rules.actions``) run when the evaluation reports a firing.

A rule in an evaluation hands its actions over (``Rule.hand_over_actions``, when the run has
this sink): its met condition carries them (``RuleEvaluationConditionMet.actions``), the
evaluation reports the firing (``StatusReporter.fired``) and this sink runs them, once per
firing, right after the log and the result file have it. As in smdebug 1.0.34 they run each
time a rule's ``invoke_at_step`` (or our ``invoke_at_end``) says the condition is met, with
the condition's text as the message; a condition the rule's code raises itself carries none
(smdebug ran no actions for it), and a firing an earlier attempt reported is not reported,
so not acted on, again when a run resumes.

The supervisor's last word (``run_closed``: the evaluation was killed, overran
``rule_step_timeout`` or was stopped) runs no action: smdebug runs actions only when a
condition is met, and a firing before the end has had its actions in the evaluation.
Actions never fail the rule or the run: their AWS errors are logged (``Actions.invoke``).

They run on one thread of this sink's, in the order of the firings: a slow or unreachable AWS
endpoint (botocore waits up to a minute per attempt) delays the actions, never the other
rules' reporting, which is told under the reporter's lock. When the evaluation ends, before
its verdict goes to the supervisor (which gives the child only seconds after it), the run
waits for the actions still queued, up to ``grace`` seconds (then says in the log how many it
left).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import structlog

from evaluator.sinks.events import EvaluationEnded, NullSink, RuleFired, RunClosed

__all__ = ["ActionsSink"]


class ActionsSink(NullSink):
    runs_actions = True

    def __init__(self, *, grace: float = 120.0) -> None:
        self.grace = grace
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None

    def rule_fired(self, event: RuleFired) -> None:
        if event.actions is None:
            return
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="rule-actions", daemon=True)
            self._worker.start()
        self._queue.put(event.actions)

    def run_closed(self, event: RunClosed) -> None:
        return None  # no condition was met here (see the module's docstring)

    def evaluation_ending(self, event: EvaluationEnded) -> None:
        self._finish()  # before the verdict: the supervisor gives the child seconds after it

    def wait(self) -> None:
        self._finish()

    def _finish(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        self._queue.put(None)
        worker.join(self.grace)
        if worker.is_alive():
            structlog.get_logger("evaluator.status").warning(
                "rule_actions_unfinished", queued=self._queue.qsize(), waited_s=self.grace
            )

    def _run(self) -> None:
        while (actions := self._queue.get()) is not None:
            try:
                actions()
            except Exception:  # Actions.invoke logs AWS errors; anything else is ours
                structlog.get_logger("evaluator.status").warning(
                    "rule_actions_failed", exc_info=True
                )
