"""``StatusReporter``: follows the rules of one run in a ``RunRecord`` and tells the run's
sinks (``evaluator.sinks``) what happens: the log, the result file, the message files and the
listeners it makes itself, then any sink handed in (the report, a webhook...)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from evaluator.config import EvaluatorConfig, RuleSpec, redact_parameters
from evaluator.errors import SMDebugError, StorageError
from evaluator.modes import WriterStep
from evaluator.redaction import scrub, secret_values
from evaluator.sinks.events import (
    EvaluationEnded,
    EvaluationStarted,
    NullSink,
    RuleFired,
    RuleNoted,
    RuleState,
    RunRecord,
    Sinks,
    StatusChanged,
    StepJudged,
    Verdict,
)
from evaluator.sinks.listeners import Listener, ListenerSink
from evaluator.sinks.log_events import LogSink
from evaluator.sinks.message_files import MessageFilesSink
from evaluator.sinks.result_file import CHECKPOINT_SECONDS, ResultFileSink
from evaluator.status.files import EvidenceSource
from evaluator.status.outcome import RuleOutcome, combined_message, overall_exit_code
from evaluator.status.resume import Resume, run_key

__all__ = ["CHECKPOINT_SECONDS", "StatusReporter"]

MAX_NOTE_LINES = 20  # rule_note lines per rule (the result file counts every note)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class StatusReporter:
    """Tracks the rules of one run and tells its sinks (``evaluator.sinks.events``).

    Rules are named by their configuration name (``RuleSpec.configuration_name``, which is the
    rule name unless a DebugRuleConfiguration gave another). Call ``start``, then
    ``step_evaluated`` / ``fired`` per step, then ``finish`` or ``fail``; ``stop`` on a signal;
    ``close`` at the end for the exit code. A signal handler should only set a flag and let the
    main loop call ``stop``. The sinks, in order: the log (``logger``, ``console``), the result
    file (``output_dir``), the message files (``message_dir``), the ``listeners``, then
    ``sinks``.
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
        checkpoint_interval: float = CHECKPOINT_SECONDS,
        console: bool = False,
        stream: TextIO | None = None,
        logger: Any = None,
        listeners: Sequence[Listener] = (),
        sinks: Sequence[NullSink] = (),
        report_file: Path | None = None,
        verdict_lines: bool = True,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._clock = clock
        self._now = now
        self._lock = threading.RLock()
        self._log = LogSink(
            logger=logger,
            console=console,
            stream=stream if stream is not None else sys.stdout,
            progress_interval=progress_interval,
            output_dir=output_dir,
            report_file=report_file,
            verdict_lines=verdict_lines,
        )
        self._record = ResultFileSink(
            output_dir, logger=logger, clock=clock, every=checkpoint_interval
        )
        self._run = RunRecord(
            {state.key: state for state in map(self._state, rules)},
            trial=trial,
            run_key=run_key,
            started_at=now(),
            result_file=self._record.path,
        )
        self._rules = self._run.rules
        self._sinks = Sinks(
            [
                self._log,
                self._record,
                MessageFilesSink(message_dir),
                ListenerSink(listeners, now=now, logger=logger),
                *sinks,
            ],
            logger=logger,
        )
        self._message: str | None = None

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
            checkpoint_interval=config.checkpoint_interval,
            **kwargs,
        )

    @staticmethod
    def _state(rule: RuleSpec | str) -> RuleState:
        if isinstance(rule, str):
            return RuleState(rule, rule, {})
        return RuleState(
            rule.name,
            rule.configuration_name,
            rule.redacted_parameters(),
            secrets=secret_values(rule.parameters),
        )

    def add_sink(self, sink: NullSink) -> None:
        """One more output, told every event from now on."""
        with self._lock:
            self._sinks.add(sink)

    def watch_data_problems(self, source: Callable[[], tuple[int, list[dict[str, Any]]]]) -> None:
        """Where the trial's data problems come from (files skipped because they were missing,
        empty or torn: ``Trial.data_problem_count`` and ``Trial.data_problems``); the result
        file and the verdict line report them."""
        with self._lock:
            self._run.data_problems = source

    def show_steps(self, shown: Callable[[int], WriterStep]) -> None:
        """How steps are shown from now on (``Trial.writer_step``): every output of the run
        shows the step the writer logged; the reporter keeps the trial's global steps."""
        with self._lock:
            for state in self._rules.values():
                state.shown = shown

    def started(self, **fields: Any) -> None:
        """The evaluation opens its trial: what is read, where from, what ends the run."""
        with self._lock:
            self._sinks.emit("evaluation_started", EvaluationStarted(self._run, fields))

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
                    self._run.resumed[key] = progress.last_step

    def resumed_step(self, rule: str) -> int | None:
        """The step up to which ``rule`` replays what an earlier attempt evaluated."""
        return self._run.resumed.get(rule)

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
            self._sinks.emit("status_changed", StatusChanged(self._run, state))

    def step_evaluated(self, rule: str, step: int, *, newest_step: int | None = None) -> None:
        """Count one evaluated step; ``newest_step`` (the trial's newest) gives the lag."""
        with self._lock:
            state = self._rules[rule]
            state.steps_evaluated += 1
            state.last_step = step
            state.newest_step = newest_step if newest_step is not None else state.newest_step
            self._sinks.emit("step_judged", StepJudged(self._run, state, self._clock()))

    def attach_evidence(self, rule: str, evidence: EvidenceSource) -> None:
        """Where the rule records what it checked: shown in progress lines and the result."""
        with self._lock:
            self._rules[rule].evidence = evidence

    def evidence(self) -> dict[str, EvidenceSource]:
        """Each rule's evidence so far, by configuration name (what listeners get with firings
        and the end; the report's data file is kept current from it)."""
        with self._lock:
            return self._run.evidence()

    def fired(
        self,
        rule: str,
        step: int,
        *,
        reasons: Sequence[Mapping[str, Any]] = (),
        actions: Callable[[], None] | None = None,
    ) -> None:
        """The rule's condition was met at ``step`` (status follows at ``finish``);
        ``reasons`` are the firing comparisons (``Check.to_dict()``); ``actions``, the
        rule's actions this firing calls for (run by the sink that ``runs_actions``)."""
        with self._lock:
            state = self._rules[rule]
            state.fired_steps.append(step)
            event = RuleFired(self._run, state, step, reasons, actions)
            self._sinks.emit("rule_fired", event)

    @property
    def runs_actions(self) -> bool:
        """Whether a sink of this run runs the actions a firing carries (then a rule hands
        its actions over: ``Rule.hand_over_actions``)."""
        return self._sinks.runs_actions

    def noted(self, rule: str, step: int, *, notes: Sequence[Mapping[str, Any]]) -> None:
        """The rule kept firings at ``step`` as notes (a converged loss with
        ``ignore_converged``): logged as ``rule_note`` (the first ``MAX_NOTE_LINES`` per rule;
        all of them are counted in the result file's evidence), never an issue."""
        with self._lock:
            state = self._rules[rule]
            state.notes_logged += 1
            if state.notes_logged > MAX_NOTE_LINES:
                return
            last = state.notes_logged == MAX_NOTE_LINES
            self._sinks.emit("rule_noted", RuleNoted(self._run, state, step, notes, last))

    def finish(self, rule: str) -> RuleOutcome:
        """The rule ended normally: IssuesFound if it fired, else NoIssuesFound."""
        with self._lock:
            state = self._rules[rule]
            return self._end(
                state,
                RuleOutcome.finished(
                    state.name, state.fired_steps, last_step=state.last_step, shown=state.shown
                ),
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
                self._log.warn("read_failed_after_firing", rule=state.key, error=text)
                return self._end(
                    state,
                    RuleOutcome.finished(
                        state.name, state.fired_steps, last_step=state.last_step, shown=state.shown
                    ),
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
            self._record.write(self._run)

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
            if self._run.exit_code is not None:
                return self._run.exit_code
            for state in self._rules.values():
                if state.outcome is None:
                    bug = RuntimeError(f"the evaluation ended before rule {state.key} finished")
                    self._end(state, RuleOutcome.from_error(state.name, bug, client=False))
            outcomes = self.outcomes
            verdict = Verdict(overall_exit_code(outcomes), combined_message(outcomes))
            self._run.exit_code = verdict.exit_code
            self._run.finished_at = self._now()
            ended = EvaluationEnded(self._run, verdict)
            self._sinks.emit("evaluation_ending", ended)  # recorded: result and message files
            self._sinks.emit("evaluation_ended", ended)  # announced: verdict line, report...
            self._run.exit_code = verdict.exit_code
            return verdict.exit_code

    @property
    def outcomes(self) -> list[RuleOutcome]:
        return [s.outcome for s in self._rules.values() if s.outcome is not None]

    # ---- internals ------------------------------------------------------------------------

    def _end(
        self, state: RuleState, outcome: RuleOutcome, error: BaseException | None = None
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
            shown = error if clean.traceback == outcome.traceback else None
            self._sinks.emit("status_changed", StatusChanged(self._run, state, shown))
        return state.outcome
