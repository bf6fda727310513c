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
"""

from __future__ import annotations

from evaluator.sinks.events import NullSink, RuleFired, RunClosed

__all__ = ["ActionsSink"]


class ActionsSink(NullSink):
    runs_actions = True

    def rule_fired(self, event: RuleFired) -> None:
        if event.actions is not None:
            event.actions()

    def run_closed(self, event: RunClosed) -> None:
        return None  # no condition was met here (see the module's docstring)
