"""The run's reporter: ``StatusReporter`` follows the rules of one run and tells its sinks.

It sits above both of the things it joins: the status vocabulary below it (``evaluator.status``:
outcomes, message texts, exit codes, the status and result files) and the outputs of a run
(``evaluator.sinks``: the log, the result and message files, listeners, the report, the rules'
actions), which know the vocabulary and nothing of the reporter. The evaluation
(``evaluator.evaluation``) and the command (``container.compose``) hold a reporter.
"""

from __future__ import annotations

from evaluator.reporting.reporter import StatusReporter

__all__ = ["StatusReporter"]
