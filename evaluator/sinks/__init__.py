"""The outputs of a run, behind one listener interface (``events``: the events and ``Sink``).

One module per output: ``log_events`` (log lines, the console's progress line, the verdict
line), ``result_file`` (``rule_evaluation_result.json``), ``message_files`` (``message`` and
``failure``), ``listeners`` (plain callables), ``report`` (``rule_report.html``), ``actions``
(the rules' ``action_json`` actions, which a firing carries), ``webhook`` (each status change
POSTed as JSON to ``--webhook-url``).
``StatusReporter`` makes the first four itself; ``container.compose`` adds the others the
configuration asks for, and hands the same sinks the supervisor's last word. A new output is
one module with a ``NullSink`` subclass plus its registration in ``container.compose.SINKS``.

The sinks sit between the status vocabulary (``evaluator.status``: its files and texts, which
they import) and the reporter that tells them (``evaluator.reporting``, which nothing here
imports).
"""

from __future__ import annotations

from evaluator.sinks.events import (
    EvaluationEnded,
    EvaluationStarted,
    NullSink,
    RuleFired,
    RuleNoted,
    RunClosed,
    Sink,
    StatusChanged,
    StepJudged,
)

__all__ = [
    "EvaluationEnded",
    "EvaluationStarted",
    "NullSink",
    "RuleFired",
    "RuleNoted",
    "RunClosed",
    "Sink",
    "StatusChanged",
    "StepJudged",
]
