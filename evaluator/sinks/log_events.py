"""The log sink: each status change, firing, note and progress line as a structlog event, the
console's progress line on a terminal, and the run's verdict line (``evaluation_finished``,
on the ``evaluator.verdict`` logger, which passes at every level)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

import structlog

from evaluator.modes import WriterStep
from evaluator.redaction import escape_controls
from evaluator.sinks.events import (
    EvaluationEnded,
    EvaluationStarted,
    NullSink,
    RuleFired,
    RuleNoted,
    RuleState,
    RunRecord,
    StatusChanged,
    StepJudged,
)
from evaluator.status.files import RESULT_FILE_NAME
from evaluator.status.outcome import RuleStatus, condition_met_message, overall_status

__all__ = ["LogSink", "progress_fields", "status_fields"]

_VERDICT = "evaluator.verdict"  # status.logging.VERDICT_LOGGER
_REDRAW_SECONDS = 0.2  # the console progress line, at most this often


class LogSink(NullSink):
    """Log events, or (``console``) one redrawn progress line instead of progress events."""

    essential = True

    def __init__(
        self,
        *,
        logger: Any = None,
        console: bool = False,
        stream: TextIO | None = None,
        progress_interval: float = 10.0,
        output_dir: Path | None = None,
        report_file: Path | None = None,
        verdict_lines: bool = True,
    ) -> None:
        # verdict_lines False: a final rule_status and evaluation_finished are the
        # supervisor's to log, from the result file (container.verdict_lines)
        self._verdict_lines = verdict_lines
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")
        self._verdict_log = logger if logger is not None else structlog.get_logger(_VERDICT)
        self._start_log = (
            logger if logger is not None else structlog.get_logger("evaluator.evaluation")
        )
        self._console = console
        self._stream = stream if stream is not None else sys.stdout
        self._progress_interval = progress_interval
        self._output_dir = output_dir
        self._report_file = report_file  # named by the verdict line; written after it
        self._drawn_at: float | None = None

    def evaluation_started(self, event: EvaluationStarted) -> None:
        self._start_log.info("evaluation_started", **event.fields)

    def status_changed(self, event: StatusChanged) -> None:
        state, outcome, error = event.rule, event.rule.outcome, event.error
        fields = status_fields(state)
        self.clear_line()
        if outcome is not None and not self._verdict_lines:
            return
        log = self._log.error if outcome and outcome.status is RuleStatus.ERROR else self._log.info
        if outcome is not None and outcome.traceback:  # a rule's own bug: show where
            if error is not None:
                log("rule_status", **fields, exc_info=error)
            else:  # the trace as the result file has it, secrets masked
                log("rule_status", **fields, exception=outcome.traceback)
        else:
            log("rule_status", **fields)

    def step_judged(self, event: StepJudged) -> None:
        state, now = event.rule, event.clock
        if self._console:
            if self._drawn_at is None or now - self._drawn_at >= _REDRAW_SECONDS:
                self._draw(event.run, now)
        elif now - state.window_start >= self._progress_interval:
            rate = (state.steps_evaluated - state.window_count) / (now - state.window_start)
            state.window_start, state.window_count = now, state.steps_evaluated
            self._log.info("rule_progress", **progress_fields(state, rate))

    def rule_fired(self, event: RuleFired) -> None:
        state, reasons = event.rule, event.reasons
        self.clear_line()
        extra: dict[str, Any] = {"reasons": [r.get("sentence") for r in reasons]} if reasons else {}
        kinds = [r["diagnosis"] for r in reasons if r.get("diagnosis")]
        if kinds:
            extra["diagnosis"] = kinds
        self._log.info(
            "rule_fired",
            rule=state.key,
            **_step_fields(state.shown(event.step)),
            message=condition_met_message(state.name, state.shown(event.step)).rstrip("\n"),
            **extra,
        )

    def rule_noted(self, event: RuleNoted) -> None:
        self.clear_line()
        more = {"further_notes": "counted in the result file, not logged"} if event.last else {}
        self._log.info(
            "rule_note",
            rule=event.rule.key,
            **_step_fields(event.rule.shown(event.step)),
            diagnosis=[n.get("diagnosis") for n in event.notes],
            notes=[n.get("sentence") for n in event.notes],
            **more,
        )

    def evaluation_ended(self, event: EvaluationEnded) -> None:
        run = event.run
        self.clear_line()
        problems, _ = run.problems()
        if problems:
            self._log.warning(
                "data_problems",
                count=problems,
                message=f"{problems} event file(s) were missing, empty, torn or corrupt: their steps "
                f"were skipped (see data_problems in {RESULT_FILE_NAME})",
            )
        if not self._verdict_lines:
            return
        outcomes = [s.outcome for s in run.rules.values() if s.outcome is not None]
        self._verdict_log.info(
            "evaluation_finished",
            status=overall_status(outcomes).value,
            exit_code=event.verdict.exit_code,
            rules={
                s.key: s.outcome.status.value for s in run.rules.values() if s.outcome is not None
            },
            result_file=run.result_file(),
            **(
                {"report": str(self._report_file.absolute())}
                if self._report_file is not None and self._output_dir is not None
                else {}
            ),
        )

    def warn(self, event: str, **fields: Any) -> None:
        """A warning line of the reporter's own (a firing whose data could no longer be read)."""
        self._log.warning(event, **fields)

    def _draw(self, run: RunRecord, now: float) -> None:
        parts = []
        for state in run.rules.values():
            elapsed = now - state.started_clock
            p = progress_fields(state, state.steps_evaluated / elapsed if elapsed > 0 else 0)
            lag = f", {p['lag_steps']} behind" if p["lag_steps"] else ""
            parts.append(
                f"{state.key}: step {p['step']} ({p['steps_evaluated']} steps, "
                f"{p['steps_per_sec']:g}/s{lag})"
                if state.outcome is None
                else f"{state.key}: {state.outcome.status.value}"
            )
        self._stream.write("\r" + escape_controls(" | ".join(parts)) + "\x1b[K")
        self._stream.flush()
        self._drawn_at = now

    def clear_line(self) -> None:
        """Take the console's progress line away before a line is logged."""
        if self._console and self._drawn_at is not None:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn_at = None


def _step_fields(step: WriterStep | None) -> dict[str, Any]:
    """``step``, and ``mode`` where the writer's steps have one (a TensorBoard run with
    phases)."""
    if step is None or step.mode is None:
        return {"step": None if step is None else step.step}
    return {"step": step.step, "mode": step.mode.name}


def progress_fields(state: RuleState, rate: float) -> dict[str, Any]:
    last = None if state.last_step is None else state.shown(state.last_step)
    newest = None if state.newest_step is None else state.shown(state.newest_step)
    lag = newest.step - last.step if newest is not None and last is not None else None
    counts = state.evidence.counts() if state.evidence is not None else {}
    return {
        "rule": state.key,
        **_step_fields(last),
        "steps_evaluated": state.steps_evaluated,
        "steps_per_sec": round(rate, 2),
        "lag_steps": lag,
        **counts,
    }


def status_fields(state: RuleState) -> dict[str, Any]:
    """A ``rule_status`` line's fields (listeners get the same)."""
    outcome = state.outcome
    fields: dict[str, Any] = {
        "rule": state.key,
        "status": state.status.value if state.status else None,
        **_step_fields(state.shown_step()),
        "message": outcome.message if outcome else None,
    }
    if outcome is not None:
        fired = state.shown_fired()
        fields.update(
            steps_evaluated=state.steps_evaluated,
            fired_steps=[f.step for f in fired],
            **(
                {"fired_modes": [f.mode.name if f.mode else None for f in fired]}
                if any(f.mode is not None for f in fired)
                else {}
            ),
            exit_code=outcome.exit_code,
        )
    if outcome is not None and outcome.error_type:
        fields["error_type"] = outcome.error_type
    return fields
