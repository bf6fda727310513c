"""``StatusReporter``: follows the rules of one run, logs each status change and progress, and
keeps the message files and the result file (``evaluator.status.files``) up to date."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import structlog

from evaluator.config import EvaluatorConfig, RuleSpec, redact_parameters
from evaluator.errors import ExitCode, SMDebugError, StorageError
from evaluator.redaction import escape_controls, scrub, secret_values
from evaluator.status.files import (
    RESULT_FILE_NAME,
    EvidenceSource,
    RuleRecord,
    iso,
    result_document,
    write_result_file,
    write_status_files,
)
from evaluator.status.outcome import (
    RuleOutcome,
    RuleStatus,
    combined_message,
    condition_met_message,
    internal_error_message,
    overall_exit_code,
    overall_status,
)
from evaluator.status.resume import Resume, run_key

__all__ = ["StatusReporter"]

_VERDICT = "evaluator.verdict"  # status.logging.VERDICT_LOGGER (reporter does not import it)
_REDRAW_SECONDS = 0.2  # the console progress line, at most this often
# The result file is the run's progress record (a restarted run resumes from it): rewritten
# at every status change and firing, and as steps are evaluated at most this often.
CHECKPOINT_SECONDS = 1.0
MAX_NOTE_LINES = 20  # rule_note lines per rule (the result file counts every note)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _RuleState(RuleRecord):
    """A rule's record, and what its progress lines are measured from."""

    newest_step: int | None = None
    secrets: frozenset[str] = frozenset()  # parameter values no text may show
    started_clock: float = 0.0
    window_start: float = 0.0  # a progress line's rate is measured since the previous line
    window_count: int = 0
    notes_logged: int = 0


class StatusReporter:
    """Tracks the rules of one run; logs status changes and progress; writes the status files.

    Rules are named by their configuration name (``RuleSpec.configuration_name``, which is the
    rule name unless a DebugRuleConfiguration gave another). Call ``start``, then
    ``step_evaluated`` / ``fired`` per step, then ``finish`` or ``fail``; ``stop`` on a signal;
    ``close`` at the end for the exit code. A signal handler should only set a flag and let the
    main loop call ``stop``.
    """

    def __init__(
        self,
        rules: Sequence[RuleSpec | str],
        *,
        output_dir: Path | None,
        message_dir: Path | None,
        trial: str | None = None,
        run_key: str | None = None,
        progress_interval: float = 10.0,
        console: bool = False,
        stream: TextIO | None = None,
        logger: Any = None,
        listeners: Sequence[Callable[[Mapping[str, Any]], None]] = (),
        report_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._rules = {state.key: state for state in map(self._state, rules)}
        self._output_dir = output_dir
        self._message_dir = message_dir
        self._trial = trial
        self._run_key = run_key
        self._resumed: dict[str, int | None] = {}
        self._progress_interval = progress_interval
        self._console = console
        self._stream = stream if stream is not None else sys.stdout
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")
        # The verdict passes at every log level (configure_logging keeps its logger at INFO).
        self._verdict_log = logger if logger is not None else structlog.get_logger(_VERDICT)
        self._listeners = tuple(listeners)
        self._report_file = report_file  # named by the verdict line; written after it
        self._clock = clock
        self._now = now
        self._lock = threading.RLock()
        self._started_at = now()
        self._finished_at: datetime | None = None
        self._exit_code: int | None = None
        self._drawn_at: float | None = None
        self._result_write_failed = False
        self._written_at = clock()
        self._data_problems: Callable[[], tuple[int, list[dict[str, Any]]]] | None = None

    @classmethod
    def from_config(cls, config: EvaluatorConfig, **kwargs: Any) -> StatusReporter:
        """A reporter for ``config``'s rules and folders; the console display is used when the
        log format is console and the stream is a terminal."""
        stream = kwargs.get("stream") or sys.stdout
        kwargs.setdefault("console", config.log_format == "console" and stream.isatty())
        return cls(
            config.rules,
            output_dir=config.output_dir,
            message_dir=config.message_dir,
            trial=config.base_trial,
            run_key=run_key(config.base_trial, config.rules),
            progress_interval=config.progress_interval,
            **kwargs,
        )

    @staticmethod
    def _state(rule: RuleSpec | str) -> _RuleState:
        if isinstance(rule, str):
            return _RuleState(rule, rule, {})
        return _RuleState(
            rule.name,
            rule.configuration_name,
            rule.redacted_parameters(),
            secrets=secret_values(rule.parameters),
        )

    def watch_data_problems(self, source: Callable[[], tuple[int, list[dict[str, Any]]]]) -> None:
        """Where the trial's data problems come from (files skipped because they were missing,
        empty or torn: ``Trial.data_problem_count`` and ``Trial.data_problems``); the result
        file and the verdict line report them."""
        with self._lock:
            self._data_problems = source

    def _problems(self) -> tuple[int, list[dict[str, Any]]]:
        if self._data_problems is None:
            return 0, []
        try:
            return self._data_problems()
        except Exception:  # a report of problems must never become one
            return 0, []

    # ---- resuming an earlier attempt ------------------------------------------------------

    def resume(self, earlier: Resume) -> None:
        """Take over what an earlier attempt recorded (``evaluator.status.resume``): verdicts
        that stand, and the firings, step counts and last steps of the rules that go on."""
        with self._lock:
            for key, progress in earlier.rules.items():
                state = self._rules.get(key)
                if state is None:
                    continue
                state.fired_steps = list(progress.fired_steps)
                state.steps_evaluated = progress.steps_evaluated
                state.last_step = progress.last_step
                if progress.outcome is not None:
                    state.outcome = progress.outcome
                    state.evidence = progress.evidence
                    state.started_at = state.finished_at = self._now()
                else:
                    self._resumed[key] = progress.last_step

    def resumed_step(self, rule: str) -> int | None:
        """The step up to which ``rule`` replays what an earlier attempt evaluated."""
        return self._resumed.get(rule)

    def fired_steps(self, rule: str) -> list[int]:
        with self._lock:
            return list(self._rules[rule].fired_steps)

    def finished(self, rule: str) -> bool:
        """Whether ``rule`` has its outcome (from this run or an earlier attempt's)."""
        with self._lock:
            return self._rules[rule].outcome is not None

    # ---- the rule's life ------------------------------------------------------------------

    def start(self, rule: str) -> None:
        with self._lock:
            state = self._rules[rule]
            state.started_at = self._now()
            state.started_clock = state.window_start = self._clock()
            self._status_changed(state)

    def step_evaluated(self, rule: str, step: int, *, newest_step: int | None = None) -> None:
        """Count one evaluated step; ``newest_step`` (the trial's newest) gives the lag."""
        with self._lock:
            state = self._rules[rule]
            state.steps_evaluated += 1
            state.last_step = step
            state.newest_step = newest_step if newest_step is not None else state.newest_step
            now = self._clock()
            if self._console:
                if self._drawn_at is None or now - self._drawn_at >= _REDRAW_SECONDS:
                    self._draw(now)
            elif now - state.window_start >= self._progress_interval:
                rate = (state.steps_evaluated - state.window_count) / (now - state.window_start)
                state.window_start, state.window_count = now, state.steps_evaluated
                self._log.info("rule_progress", **self._progress_fields(state, rate))
            if now - self._written_at >= CHECKPOINT_SECONDS:
                self._write_result()

    def attach_evidence(self, rule: str, evidence: EvidenceSource) -> None:
        """Where the rule records what it checked: shown in progress lines and the result."""
        with self._lock:
            self._rules[rule].evidence = evidence

    def evidence(self) -> dict[str, EvidenceSource]:
        """Each rule's evidence so far, by configuration name (what listeners get with firings
        and the end; the report's data file is kept current from it)."""
        with self._lock:
            return self._evidence()

    def fired(self, rule: str, step: int, *, reasons: Sequence[Mapping[str, Any]] = ()) -> None:
        """The rule's condition was met at ``step`` (status follows at ``finish``);
        ``reasons`` are the firing comparisons (``Check.to_dict()``)."""
        with self._lock:
            state = self._rules[rule]
            state.fired_steps.append(step)
            self._clear_line()
            extra: dict[str, Any] = (
                {"reasons": [r.get("sentence") for r in reasons]} if reasons else {}
            )
            kinds = [r["diagnosis"] for r in reasons if r.get("diagnosis")]
            if kinds:
                extra["diagnosis"] = kinds
            self._log.info(
                "rule_fired",
                rule=state.key,
                step=step,
                message=condition_met_message(state.name, step).rstrip("\n"),
                **extra,
            )
            self._write_result()
            self._notify(
                "rule_fired",
                {
                    "rule": state.key,
                    "step": step,
                    "result_file": self._result_path(),
                    "evidence": self._evidence(),
                },
            )

    def noted(self, rule: str, step: int, *, notes: Sequence[Mapping[str, Any]]) -> None:
        """The rule kept firings at ``step`` as notes (a converged loss with
        ``ignore_converged``): logged as ``rule_note`` (the first ``MAX_NOTE_LINES`` per rule;
        all of them are counted in the result file's evidence), never an issue."""
        with self._lock:
            state = self._rules[rule]
            state.notes_logged += 1
            if state.notes_logged > MAX_NOTE_LINES:
                return
            self._clear_line()
            more = (
                {"further_notes": "counted in the result file, not logged"}
                if state.notes_logged == MAX_NOTE_LINES
                else {}
            )
            self._log.info(
                "rule_note",
                rule=state.key,
                step=step,
                diagnosis=[n.get("diagnosis") for n in notes],
                notes=[n.get("sentence") for n in notes],
                **more,
            )
            self._write_result()

    def finish(self, rule: str) -> RuleOutcome:
        """The rule ended normally: IssuesFound if it fired, else NoIssuesFound."""
        with self._lock:
            state = self._rules[rule]
            return self._end(
                state,
                RuleOutcome.finished(state.name, state.fired_steps, last_step=state.last_step),
            )

    def fail(
        self,
        rule: str,
        error: BaseException,
        *,
        client: bool | None = None,
    ) -> RuleOutcome:
        """The rule ended with ``error``; see ``RuleOutcome.from_error`` for ``client``. A rule
        that already fired keeps ``IssuesFound`` when the data can no longer be read (a storage
        or data error): the firing stands, and the error is recorded beside it."""
        with self._lock:
            state = self._rules[rule]
            if state.fired_steps and isinstance(error, (StorageError, SMDebugError)):
                text = scrub(f"{type(error).__name__}: {error}", state.secrets)
                state.error_after_firing = text
                self._log.warning("read_failed_after_firing", rule=state.key, error=text)
                return self._end(
                    state,
                    RuleOutcome.finished(state.name, state.fired_steps, last_step=state.last_step),
                )
            return self._end(
                state,
                RuleOutcome.from_error(state.name, error, client=client, step=state.last_step),
                error,
            )

    def set_parameters(self, rule: str, parameters: Mapping[str, str | None]) -> None:
        """The parameters the rule was built with (defaults included) replace the given ones
        in the result file, secrets masked."""
        with self._lock:
            state = self._rules[rule]
            state.parameters = redact_parameters(parameters)  # type: ignore[arg-type]
            state.secrets = state.secrets | secret_values(parameters)
            self._write_result()

    def stop(self, signum: int) -> None:
        """Mark every rule still running (or not yet started) Stopped."""
        with self._lock:
            for state in self._rules.values():
                if state.outcome is None:
                    self._end(
                        state,
                        RuleOutcome.stopped(
                            state.name, signum, step=state.last_step, fired_steps=state.fired_steps
                        ),
                    )

    def close(self) -> int:
        """Final files and log line; returns the run's exit code. A rule left unfinished counts
        as an internal error. Calling it again returns the same code."""
        with self._lock:
            if self._exit_code is not None:
                return self._exit_code
            for state in self._rules.values():
                if state.outcome is None:
                    bug = RuntimeError(f"the evaluation ended before rule {state.key} finished")
                    self._end(state, RuleOutcome.from_error(state.name, bug, client=False))
            outcomes = self.outcomes
            self._exit_code = overall_exit_code(outcomes)
            self._finished_at = self._now()
            message = combined_message(outcomes)
            failure = self._write_result()
            if failure is not None:  # a full disk: the verdict is not recorded, so none stands
                self._exit_code = ExitCode.INTERNAL_ERROR.value
                message = internal_error_message(
                    f"the result file could not be written in {self._output_dir}: {failure}"
                )
                self._log.error("result_file_failed", message=message, exit_code=self._exit_code)
            if message is not None and self._message_dir is not None:
                write_status_files(self._message_dir, message)
            self._clear_line()
            problems, _ = self._problems()
            if problems:
                self._log.warning(
                    "data_problems",
                    count=problems,
                    message=f"{problems} event file(s) were missing, empty or torn: their steps "
                    f"were skipped (see data_problems in {RESULT_FILE_NAME})",
                )
            self._verdict_log.info(
                "evaluation_finished",
                status=overall_status(outcomes).value,
                exit_code=self._exit_code,
                rules={
                    s.key: s.outcome.status.value
                    for s in self._rules.values()
                    if s.outcome is not None
                },
                result_file=self._result_path(),
                **(
                    {"report": str(self._report_file.absolute())}
                    if self._report_file is not None and self._output_dir is not None
                    else {}
                ),
            )
            self._notify(
                "evaluation_finished",
                {
                    "exit_code": self._exit_code,
                    "result_file": self._result_path(),
                    "evidence": self._evidence(),
                },
            )
            return self._exit_code

    @property
    def outcomes(self) -> list[RuleOutcome]:
        return [s.outcome for s in self._rules.values() if s.outcome is not None]

    # ---- internals ------------------------------------------------------------------------

    def _end(
        self, state: _RuleState, outcome: RuleOutcome, error: BaseException | None = None
    ) -> RuleOutcome:
        if state.outcome is None:
            # A rule's exception may quote a secret parameter: no message or trace shows it.
            clean = replace(
                outcome,
                message=scrub(outcome.message, state.secrets) if outcome.message else None,
                traceback=scrub(outcome.traceback, state.secrets) if outcome.traceback else None,
            )
            state.outcome = clean
            state.finished_at = self._now()
            # The exception itself is logged only when its text holds nothing to hide.
            self._status_changed(state, error if clean.traceback == outcome.traceback else None)
        return state.outcome

    def _status_changed(self, state: _RuleState, error: BaseException | None = None) -> None:
        outcome = state.outcome
        fields: dict[str, Any] = {
            "rule": state.key,
            "status": state.status.value if state.status else None,
            "step": outcome.step if outcome else state.last_step,
            "message": outcome.message if outcome else None,
        }
        if outcome is not None:
            fields.update(
                steps_evaluated=state.steps_evaluated,
                fired_steps=list(state.fired_steps),
                exit_code=outcome.exit_code,
            )
        if outcome is not None and outcome.error_type:
            fields["error_type"] = outcome.error_type
        self._clear_line()
        log = self._log.error if outcome and outcome.status is RuleStatus.ERROR else self._log.info
        if outcome is not None and outcome.traceback:  # a rule's own bug: show where
            if error is not None:
                log("rule_status", **fields, exc_info=error)
            else:  # the trace as the result file has it, secrets masked
                log("rule_status", **fields, exception=outcome.traceback)
        else:
            log("rule_status", **fields)
        self._notify("rule_status", fields)
        self._write_result()

    def _evidence(self) -> dict[str, EvidenceSource]:
        return {s.key: s.evidence for s in self._rules.values() if s.evidence is not None}

    def _notify(self, event: str, fields: Mapping[str, Any]) -> None:
        """Pass ``event`` to the listeners (status changes before the result file is rewritten;
        firings and the end after it, with ``result_file`` and each rule's ``evidence``, the
        objects the rules record into, by configuration name)."""
        for listener in self._listeners:
            try:
                listener({"event": event, "timestamp": iso(self._now()), **fields})
            except Exception:  # a sink must never change the verdict
                self._log.warning("status_listener_failed", exc_info=True)

    @staticmethod
    def _progress_fields(state: _RuleState, rate: float) -> dict[str, Any]:
        lag = (
            state.newest_step - state.last_step
            if state.newest_step is not None and state.last_step is not None
            else None
        )
        counts = state.evidence.counts() if state.evidence is not None else {}
        return {
            "rule": state.key,
            "step": state.last_step,
            "steps_evaluated": state.steps_evaluated,
            "steps_per_sec": round(rate, 2),
            "lag_steps": lag,
            **counts,
        }

    def _draw(self, now: float) -> None:
        parts = []
        for state in self._rules.values():
            elapsed = now - state.started_clock
            p = self._progress_fields(state, state.steps_evaluated / elapsed if elapsed > 0 else 0)
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

    def _clear_line(self) -> None:
        if self._console and self._drawn_at is not None:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn_at = None

    def _result_path(self) -> str | None:
        """The result file's path as written (absolute); None when there is none."""
        if self._output_dir is None or self._result_write_failed:
            return None
        return str((self._output_dir / RESULT_FILE_NAME).absolute())

    def _write_result(self) -> str | None:
        """Rewrite the result file; why it could not be written, or None."""
        if self._output_dir is None:
            return None
        self._written_at = self._clock()
        document = result_document(
            list(self._rules.values()),
            trial=self._trial,
            started_at=self._started_at,
            finished_at=self._finished_at,
            exit_code=self._exit_code,
            run_key=self._run_key,
            resumed=self._resumed or None,
            data_problems=self._problems(),
        )
        try:
            write_result_file(self._output_dir, document)
        except OSError as e:
            if not self._result_write_failed:  # say it once, not at every status change
                self._result_write_failed = True
                self._log.warning(
                    "result_file_not_written", path=str(self._output_dir), error=str(e)
                )
            return e.strerror or str(e)
        return None
