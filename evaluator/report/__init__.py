"""The rule report: one self-contained HTML page beside the result file that shows each
rule's verdict, the history of what it tested (charts), and, after an Error, what to fix and
what the trial holds.

``ReportWriter`` writes it during a run (driven by the report sink, ``evaluator.sinks.report``);
``write_report`` writes it from an output folder (``rule-evaluator report``). Modules:
``data`` (the data file the series are kept in), ``run_curves`` (the whole run behind the
loss curves, read from the trial when a report is written), ``charts`` (chart specs the
page's inlined uPlot draws), ``html_charts`` (bars, matrices, histograms in HTML), ``page``
(the look, the scripts), ``advice`` (what to try), ``section_charts`` and ``sections`` (one
rule), ``render`` (the page), ``writer`` (files, the listener, the supervisor's call)."""

from __future__ import annotations

from evaluator.report.data import DATA_FILE_NAME
from evaluator.report.writer import (
    REPORT_FILE_NAME,
    ReportWriter,
    report_unfinished,
    write_report,
)

__all__ = [
    "DATA_FILE_NAME",
    "REPORT_FILE_NAME",
    "ReportWriter",
    "report_unfinished",
    "write_report",
]
