"""The result file sink: ``rule_evaluation_result.json`` (``evaluator.status.files``), the
run's progress record, rewritten at every status change, firing and note, as steps are judged
at most every ``CHECKPOINT_SECONDS`` (the run's ``checkpoint_interval``), and once more with the verdict. It is ``essential``: a
verdict it cannot record is none (the run becomes an internal error, exit 3). For the
supervisor's last word it closes the file the evaluation left (``evaluator.status.final``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from evaluator.errors import ExitCode
from evaluator.sinks.events import (
    EvaluationEnded,
    NullSink,
    RuleFired,
    RuleNoted,
    RunClosed,
    RunRecord,
    StatusChanged,
    StepJudged,
)
from evaluator.status.files import RESULT_FILE_NAME, result_document, write_result_file
from evaluator.status.final import close_result_at
from evaluator.status.outcome import internal_error_message

__all__ = ["CHECKPOINT_SECONDS", "ResultFileSink"]

# The result file is the run's progress record (a restarted run resumes from it): rewritten
# at every status change and firing, and as steps are evaluated at most this often (by
# default: ``checkpoint_interval`` sets it).
CHECKPOINT_SECONDS = 1.0


class ResultFileSink(NullSink):
    """The result file in ``output_dir`` (a run), or in the folder ``dir_fd`` the supervisor
    opened before rule code could run (``run_closed``). No folder: no file."""

    essential = True

    def __init__(
        self,
        output_dir: Path | None = None,
        *,
        dir_fd: int | None = None,
        logger: Any = None,
        clock: Callable[[], float] = time.monotonic,
        every: float = CHECKPOINT_SECONDS,
    ) -> None:
        self._output_dir = output_dir
        self._every = every  # seconds between rewrites while steps are judged
        self._dir_fd = dir_fd
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")
        self._clock = clock
        self._failed = False
        self._written_at = clock()

    def path(self) -> str | None:
        """The result file's path as written (absolute); None when there is none."""
        if self._output_dir is None or self._failed:
            return None
        return str((self._output_dir / RESULT_FILE_NAME).absolute())

    def write(self, run: RunRecord) -> str | None:
        """Rewrite the result file; why it could not be written, or None."""
        if self._output_dir is None:
            return None
        self._written_at = self._clock()
        document = result_document(
            list(run.rules.values()),
            trial=run.trial,
            started_at=run.started_at,
            finished_at=run.finished_at,
            exit_code=run.exit_code,
            run_key=run.run_key,
            resumed=run.resumed or None,
            data_problems=run.problems(),
        )
        try:
            write_result_file(self._output_dir, document)
        except OSError as e:
            if not self._failed:  # say it once, not at every status change
                self._failed = True
                self._log.warning(
                    "result_file_not_written", path=str(self._output_dir), error=str(e)
                )
            return e.strerror or str(e)
        return None

    def status_changed(self, event: StatusChanged) -> None:
        self.write(event.run)

    def step_judged(self, event: StepJudged) -> None:
        if event.clock - self._written_at >= self._every:
            self.write(event.run)

    def rule_fired(self, event: RuleFired) -> None:
        self.write(event.run)

    def rule_noted(self, event: RuleNoted) -> None:
        self.write(event.run)

    def evaluation_ending(self, event: EvaluationEnded) -> None:
        failure = self.write(event.run)
        if failure is not None:  # a full disk: the verdict is not recorded, so none stands
            verdict = event.verdict
            verdict.exit_code = event.run.exit_code = ExitCode.INTERNAL_ERROR.value
            verdict.message = internal_error_message(
                f"the result file could not be written in {self._output_dir}: {failure}"
            )
            self._log.error(
                "result_file_failed", message=verdict.message, exit_code=verdict.exit_code
            )

    def run_closed(self, event: RunClosed) -> None:
        if self._dir_fd is not None:
            close_result_at(
                self._dir_fd,
                status=event.status,
                exit_code=event.exit_code,
                text=event.text,
                error_type=event.error_type,
                culprit=event.culprit,
                others_text=event.others_text,
                force=event.force,
            )
