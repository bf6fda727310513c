"""Writing the report: ``write_report`` (from a result file, with whatever the run's rules
recorded) and ``ReportWriter``, the ``StatusReporter`` listener that keeps the report current
during a run: at each firing (at most every ``min_interval`` seconds) and at the end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from evaluator.fileio import read_capped, write_atomically
from evaluator.report.data import IGNORED_DIR, collect, read_data, write_data
from evaluator.report.render import render_report

__all__ = ["REPORT_FILE_NAME", "ReportWriter", "write_report"]

REPORT_FILE_NAME = "rule_report.html"


def write_report(result_file: Path, *, evidence: Mapping[str, Any] | None = None) -> Path:
    """Write ``rule_report.html`` beside ``result_file`` and return its path. With
    ``evidence`` (each rule's ``Evidence`` by configuration name: a run), the data file is
    first brought up to date from it; without, the report is drawn from the data file alone
    (``rule-evaluator report``). Raises ``OSError`` when a file cannot be read or written,
    ``ValueError`` for a result file that is not JSON."""
    output_dir = result_file.parent
    try:  # a regular file within the size limit, never a FIFO or device
        raw = read_capped(result_file, 64 * 1024 * 1024)
        result = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{result_file} is nested too deeply to be a result file") from None
    if not isinstance(result, dict):
        raise ValueError(f"{result_file} does not hold a result document")
    data = read_data(output_dir)
    if evidence is not None:
        data = collect(result, data, evidence)
        write_data(output_dir, data)
    page = render_report(result, data).encode("utf-8")
    path = output_dir / REPORT_FILE_NAME
    write_atomically(path, page, tmp_dir=output_dir / IGNORED_DIR)
    return path


class ReportWriter:
    """A ``StatusReporter`` listener: on ``rule_fired`` and ``evaluation_finished`` events
    (which come after the result file is rewritten, name it, and carry the rules' ``Evidence``
    as ``evidence``) it writes the report beside the result file. Firings closer than ``min_interval`` seconds to the last report are
    skipped (the end always writes). A failure is logged and never raised: the report is a
    help, never the verdict."""

    def __init__(
        self,
        *,
        min_interval: float = 5.0,
        logger: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._min_interval = min_interval
        self._log = logger if logger is not None else structlog.get_logger("evaluator.report")
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()
        self.path: Path | None = None

    def __call__(self, event: Mapping[str, Any]) -> None:
        kind, result_file = event.get("event"), event.get("result_file")
        if kind not in ("rule_fired", "evaluation_finished") or not result_file:
            return
        with self._lock:
            now = self._clock()
            if (
                kind == "rule_fired"
                and self._last is not None
                and now - self._last < self._min_interval
            ):
                return
            try:
                found = event.get("evidence")
                self.path = write_report(
                    Path(result_file), evidence=found if isinstance(found, Mapping) else {}
                )
            except (OSError, ValueError) as e:
                self._log.warning("rule_report_not_written", error=str(e))
                return
            finally:
                self._last = self._clock()
            self._log.info("rule_report_written", report=str(self.path.absolute()))
