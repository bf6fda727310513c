"""The report sink: ``rule_report.html`` beside the result file (``evaluator.report``).

During a run the ``ReportWriter`` hears firings and the end (written on threads of their own,
never in the way of the verdict) and keeps the report's data file current; for the
supervisor's last word (the evaluation killed, or a step over ``rule_step_timeout``) the
report is drawn from the files the run left, so it says why the run ended. After a stop
signal there is none: the few seconds the stop leaves belong to the status files."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluator.report import ReportWriter, report_unfinished
from evaluator.report.writer import DATA_SECONDS, REPORT_SECONDS
from evaluator.sinks.events import RunClosed, StepJudged
from evaluator.sinks.listeners import ListenerSink

__all__ = ["ReportSink"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ReportSink(ListenerSink):
    essential = False

    def __init__(
        self,
        writer: ReportWriter | None = None,
        *,
        now: Callable[[], datetime] = _utc_now,
        logger: Any = None,
    ) -> None:
        self.writer = writer if writer is not None else ReportWriter()
        super().__init__([self.writer], now=now, logger=logger)

    def keep_data_current(
        self,
        result_file: Path,
        evidence: Callable[[], Any],
        every: float = DATA_SECONDS,
    ) -> None:
        """Keep the data file current while the run goes on (``ReportWriter``), so the report
        of an evaluation that is killed still has its curves."""
        self.writer.keep_data_current(result_file, evidence, every)

    def step_judged(self, event: StepJudged) -> None:
        self.writer.note_news()  # the data file keeper has something to write

    def wait(self, timeout: float = REPORT_SECONDS) -> None:
        """Wait at most ``timeout`` seconds for the final report."""
        self.writer.wait(timeout)

    def run_closed(self, event: RunClosed) -> None:
        if not event.stopped:
            report_unfinished(event.result_dir)
