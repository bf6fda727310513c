"""Writing the report: ``write_report`` (from a result file, with whatever the run's rules
recorded) and ``ReportWriter``, the ``StatusReporter`` listener that keeps the report current
during a run, never in the way of the verdict:

* a firing schedules a write ``firing_delay`` seconds later on a thread of its own (at most
  one every ``min_interval`` seconds); a run that ends first never writes it;
* the end (``evaluation_finished``, notified after the verdict line is logged) starts the
  final write on a thread of its own; the command sends its verdict to the supervisor, then
  waits for the report at most ``REPORT_SECONDS`` (``wait``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from evaluator.fileio import read_capped, write_atomically
from evaluator.report.data import (
    IGNORED_DIR,
    carried_over,
    collect,
    data_stamp,
    read_data,
    write_data,
)
from evaluator.report.render import render_report

__all__ = ["REPORT_FILE_NAME", "REPORT_SECONDS", "ReportWriter", "write_report"]

REPORT_FILE_NAME = "rule_report.html"
REPORT_SECONDS = 3.0  # how long the end of a run waits for its report (inside VERDICT_GRACE)
DATA_SECONDS = 10.0  # how often a running evaluation brings the data file up to date


def write_report(result_file: Path, *, evidence: Mapping[str, Any] | None = None) -> Path:
    """Write ``rule_report.html`` beside ``result_file`` and return its path. With
    ``evidence`` (each rule's ``Evidence`` by configuration name: a run), the data file is
    first brought up to date from it; without, the report is drawn from the data file alone
    (``rule-evaluator report``, or the supervisor after the evaluation was killed). Raises
    ``OSError`` when a file cannot be read or written, ``ValueError`` for a result file that
    is not JSON."""
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
    as ``evidence``) it writes the report beside the result file, on a thread of its own.
    A failure is logged and never raised: the report is a help, never the verdict."""

    def __init__(
        self,
        *,
        min_interval: float = 5.0,
        firing_delay: float = 1.0,
        logger: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._min_interval = min_interval
        self._firing_delay = firing_delay
        self._log = logger if logger is not None else structlog.get_logger("evaluator.report")
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()  # one write at a time
        self._state = threading.Lock()  # the fields below
        self._timer: threading.Timer | None = None
        self._final: threading.Thread | None = None
        self._ended = False
        self._over = threading.Event()  # the run ended: the data file keeper stops
        self._news = threading.Event()  # a rule judged a step since the data file was written
        self.path: Path | None = None
        self.seconds: float | None = None  # how long the last write took

    def __call__(self, event: Mapping[str, Any]) -> None:
        kind, result_file = event.get("event"), event.get("result_file")
        if kind not in ("rule_fired", "evaluation_finished") or not result_file:
            return
        found = event.get("evidence")
        evidence = found if isinstance(found, Mapping) else {}
        with self._state:
            if self._ended:
                return
            if kind == "evaluation_finished":
                self._ended = True
                self._over.set()
                self._news.set()  # (wakes the data file keeper, which ends)
                if self._timer is not None:
                    self._timer.cancel()
                self._final = threading.Thread(
                    target=self._write,
                    args=(Path(result_file), evidence),
                    name="rule-report",
                    daemon=True,
                )
                self._final.start()
                return
            now = self._clock()
            recent = self._last is not None and now - self._last < self._min_interval
            if self._timer is not None or recent:
                return  # a write is due already, or one was just made
            self._timer = threading.Timer(
                self._firing_delay, self._on_timer, args=(Path(result_file), evidence)
            )
            self._timer.daemon = True
            self._timer.start()

    def note_news(self) -> None:
        """A rule judged a step: what the data file holds may be out of date."""
        self._news.set()

    def keep_data_current(
        self,
        result_file: Path,
        evidence: Callable[[], Mapping[str, Any]],
        every: float = DATA_SECONDS,
    ) -> None:
        """While the run goes on, bring the data file beside ``result_file`` up to date from
        ``evidence`` (each rule's, by configuration name) at most every ``every`` seconds and
        only after a rule judged a step (``note_news``), on a thread of its own: the report
        of a run whose evaluation is killed, which the supervisor draws from the files, then
        still has its curves. A run waiting for data costs it no wake-up."""

        output_dir = result_file.parent
        # The file this thread last wrote, and what of it the next turn takes (``carried_over``):
        # the file is read back only when another writer (a firing's report, which adds the
        # run's curves) replaced it since.
        written: tuple[tuple[int, int, int] | None, dict[str, Any]] = (None, {})

        def keep() -> None:
            nonlocal written
            while self._news.wait() and not self._over.wait(every):
                with self._lock:
                    if self._over.is_set():
                        return
                    self._news.clear()  # news from here on brings another turn
                    try:
                        result = json.loads(result_file.read_text(encoding="utf-8"))
                        stamp, previous = written
                        if stamp is None or stamp != data_stamp(output_dir):
                            previous = read_data(output_dir)
                        # the whole run is read for a report only, never on this timer
                        alive = evidence()
                        data = collect(result, previous, alive, read_run=False)
                        write_data(output_dir, data)
                        written = (data_stamp(output_dir), carried_over(data, alive))
                    except Exception:  # not there yet, or being replaced: the next news
                        self._news.set()

        threading.Thread(target=keep, name="rule-report-data", daemon=True).start()

    def wait(self, timeout: float = REPORT_SECONDS) -> bool:
        """Wait at most ``timeout`` seconds for the final report; whether it is done (True
        when there is none to write). One not done in time is logged."""
        with self._state:
            final = self._final
        if final is None:
            return True
        final.join(timeout)
        if final.is_alive():
            self._log.warning(
                "rule_report_not_written",
                error=f"the report took longer than {timeout:g} s; the run ends without it "
                "(rule-evaluator report OUTPUT_DIR writes it)",
            )
            return False
        return True

    def _on_timer(self, result_file: Path, evidence: Mapping[str, Any]) -> None:
        with self._state:
            self._timer = None
            if self._ended:
                return
        self._write(result_file, evidence)

    def _write(self, result_file: Path, evidence: Mapping[str, Any]) -> None:
        with self._lock:
            started = time.perf_counter()
            try:
                self.path = write_report(result_file, evidence=evidence)
            except Exception as e:  # a report bug must never reach the run's output
                self._log.warning("rule_report_not_written", error=f"{type(e).__name__}: {e}")
                return
            finally:
                self._last = self._clock()
            self.seconds = time.perf_counter() - started
            # DEBUG: the verdict line stays the run's last line (it names the report).
            self._log.debug(
                "rule_report_written", report=str(self.path.absolute()), seconds=self.seconds
            )


def report_unfinished(result_dir: str | Path | None, timeout: float = REPORT_SECONDS) -> bool:
    """The report of a run whose evaluation was ended before its verdict (killed, out of
    memory, a step over ``rule_step_timeout``), drawn from what it left: the result file the
    supervisor has just closed and the data file of the last report. Waits at most
    ``timeout`` seconds; never raises. Returns whether it was written."""
    if result_dir is None:
        return False
    result_file = Path(result_dir) / "rule_evaluation_result.json"
    if not result_file.is_file():
        return False
    done: list[Path] = []

    def write() -> None:
        try:
            done.append(write_report(result_file))
        except Exception:  # the supervisor's verdict stands; a report is a help
            pass

    thread = threading.Thread(target=write, name="rule-report", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(done)
