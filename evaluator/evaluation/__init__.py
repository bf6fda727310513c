"""One evaluation: open the trial, build every rule, run them, report statuses.

Several rules share one base trial, so one poller and one cache serve them all; each rule runs
``invoke_rule`` on its own thread (rules mostly wait for data or run numpy, both of which
release the GIL). The most severe outcome decides the exit code (``evaluator.status``).
Modules: ``run`` (``Evaluation``), ``progress`` (what a rule's thread reports as it goes),
``failures`` (what a failure is reported as).
"""

from __future__ import annotations

from evaluator.evaluation.progress import StepWatch
from evaluator.evaluation.run import Evaluation

__all__ = ["Evaluation", "StepWatch"]
