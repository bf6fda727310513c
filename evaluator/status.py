"""Rule statuses, the texts SageMaker shows for them, exit codes, status files and logging.

Outcomes and exit codes (DESIGN §5):

=================  =====  ==============================================================
status             exit   message text (``/opt/ml/output/message`` and ``failure``)
=================  =====  ==============================================================
``NoIssuesFound``  0      none
``IssuesFound``    1      ``RuleEvaluationConditionMet: Evaluation of the rule <Rule> at
                          step <N> resulted in the condition being met`` + newline
``Error``          2      ``ClientError: <message>`` (the user must fix something)
``Error``          3      ``InternalServerError: <message>`` (our bug)
``Stopped``        143    ``Stopped`` (SIGTERM; 130 for SIGINT: 128 + the signal number)
=================  =====  ==============================================================

Texts are UTF-8 and cut to SageMaker's 1 KB (``MESSAGE_LIMIT``) at a character boundary.

**Several rules, one exit code.** The most severe outcome wins, in this order: a stop by a
signal (the process was told to end; the other verdicts are incomplete) > internal error (a
verdict may be wrong) > client error (a verdict is missing) > issues found > no issues. The
message file then holds every non-empty rule message, most severe first, one per line.

**The result file** ``<output>/rule_evaluation_result.json`` is rewritten atomically (a temporary
file under ``<output>/.sagemaker-ignore/``, which SageMaker does not upload, then a rename) at
every status change, so a reader never sees half a file. Schema, version 1::

    {
      "version": 1,
      "status": "IssuesFound",          # overall: InProgress until the run ends
      "exit_code": 1,                   # null while in progress
      "message": "RuleEvaluationConditionMet: ...\\n",   # the message file's text, or null
      "trial": "s3://bucket/job/debug-output",
      "started_at": "2024-05-01T12:00:00.000Z", "finished_at": "...",  # UTC; null if running
      "rules": [{
        "rule": "VanishingGradient",            # rule_to_invoke
        "configuration_name": "VanishingGradient",
        "status": "IssuesFound", "exit_code": 1,
        "step": 500,               # first firing step; otherwise the last step evaluated
        "fired_steps": [500],      # every firing step (several with continue_after_fire)
        "steps_evaluated": 12,
        "details": "RuleEvaluationConditionMet: ...\\n",   # StatusDetails text, or null
        "error_type": null,        # exception class name for Error
        "traceback": null,         # for exceptions other than our ClientError/InternalServerError
        "parameters": {"threshold": "0.0001"},           # secrets masked
        "evidence": {              # why: see below; null for a rule that was never built
          "tensors_checked": 3, "steps_checked": 12, "comparisons": 36,
          "tensor_values_read": 36, "tensors_read": 3, "firings": 1,
          "reasons": [{            # every firing comparison (the first 100)
            "step": 500, "mode": "TRAIN", "mode_step": 500, "worker": "worker_0",
            "tensors": ["gradients/dense/kernelGrad"], "quantity": "mean |gradient|",
            "value": 3.1e-09, "comparison": "<", "parameter": "threshold",
            "threshold": 1e-07, "sentence": "VanishingGradient: mean |gradient| of ..."}],
          "closest": [ ... ]       # per parameter and comparison, the check nearest to
        },                         # firing (or a firing one), same fields as a reason
        "started_at": "...", "finished_at": "..."
      }],
      # with exactly one rule, its rule, step, fired_steps, details, parameters and evidence
      # are also repeated here at the top level, so `jq .step` works on the common case
    }

Values that JSON cannot hold (NaN, infinities) are written as the strings "NaN", "Infinity"
and "-Infinity". A rule that compared nothing and read no tensor never ends ``NoIssuesFound``:
the evaluator ends it with ``Error`` (``InsufficientInformationForRuleInvocation``, exit 2).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, TextIO

import structlog

from evaluator.config import EvaluatorConfig, RuleSpec
from evaluator.errors import EvaluatorError, SMDebugError
from evaluator.fileio import write_atomically

__all__ = [
    "EXIT_CLIENT_ERROR",
    "EXIT_INTERNAL_ERROR",
    "EXIT_ISSUES_FOUND",
    "EXIT_NO_ISSUES",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "MESSAGE_LIMIT",
    "RESULT_FILE_NAME",
    "STOPPED_MESSAGE",
    "RuleOutcome",
    "RuleStatus",
    "StatusReporter",
    "client_error_message",
    "combined_message",
    "condition_met_message",
    "configure_logging",
    "internal_error_message",
    "overall_exit_code",
    "overall_status",
    "truncate_utf8",
    "write_status_files",
]

EXIT_NO_ISSUES = 0
EXIT_ISSUES_FOUND = 1
EXIT_CLIENT_ERROR = 2
EXIT_INTERNAL_ERROR = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
MESSAGE_LIMIT = 1024
STOPPED_MESSAGE = "Stopped"
RESULT_FILE_NAME = "rule_evaluation_result.json"
_TRUNCATED = " ...[truncated]"
_REDRAW_SECONDS = 0.2  # the console progress line, at most this often
_IGNORED_DIR = ".sagemaker-ignore"  # SageMaker does not upload this folder of the output
# At DEBUG botocore logs request headers, credentials included: never below INFO.
_CLAMPED_LOGGERS = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")


class RuleStatus(str, Enum):
    """SageMaker's RuleEvaluationStatus values a rule container can end in."""

    IN_PROGRESS = "InProgress"
    ISSUES_FOUND = "IssuesFound"
    NO_ISSUES_FOUND = "NoIssuesFound"
    ERROR = "Error"
    STOPPED = "Stopped"


def condition_met_message(rule: str, step: int) -> str:
    return (f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} "
            "resulted in the condition being met\n")


def client_error_message(text: str) -> str:
    return f"ClientError: {text}"


def internal_error_message(text: str) -> str:
    return f"InternalServerError: {text}"


def truncate_utf8(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and a marker, within the
    limit and without splitting a character."""
    data = text.encode("utf-8", errors="backslashreplace")
    if len(data) <= limit:
        return text
    head = data[: max(0, limit - len(_TRUNCATED))].decode("utf-8", errors="ignore")
    return head + _TRUNCATED


@dataclass(frozen=True)
class RuleOutcome:
    """How one rule ended."""

    rule: str
    status: RuleStatus
    exit_code: int
    step: int | None = None
    fired_steps: tuple[int, ...] = ()
    message: str | None = None  # the StatusDetails text; None for NoIssuesFound
    error_type: str | None = None
    traceback: str | None = None

    @classmethod
    def finished(cls, rule: str, fired_steps: Sequence[int], *,
                 last_step: int | None = None) -> RuleOutcome:
        """IssuesFound at the first firing step if the rule fired, else NoIssuesFound."""
        if not fired_steps:
            return cls(rule, RuleStatus.NO_ISSUES_FOUND, EXIT_NO_ISSUES, last_step)
        return cls(rule, RuleStatus.ISSUES_FOUND, EXIT_ISSUES_FOUND, fired_steps[0],
                   tuple(fired_steps), condition_met_message(rule, fired_steps[0]))

    @classmethod
    def from_error(cls, rule: str, error: BaseException, *, client: bool | None = None,
                   step: int | None = None) -> RuleOutcome:
        """Error. ``client`` forces the category (True for exceptions raised by a user's rule
        code); by default our errors carry their own, smdebug's are the data's fault (client),
        anything else is our bug."""
        ours = isinstance(error, EvaluatorError)
        if client is None:
            client = error.exit_code == EXIT_CLIENT_ERROR if ours else isinstance(
                error, SMDebugError)
        # A wrapper naming a rule's failure keeps the original exception's type.
        name = getattr(error, "error_type", None) or type(error).__name__
        text = str(error) if ours else (f"{name}: {error}" if str(error) else name)
        message = client_error_message(text) if client else internal_error_message(text)
        # Our errors carry no traceback of their own; one that wraps a user's exception shows
        # that exception's traceback.
        shown = error.__cause__ if ours else error
        trace = None if shown is None else "".join(traceback.format_exception(shown))
        return cls(rule, RuleStatus.ERROR, EXIT_CLIENT_ERROR if client else EXIT_INTERNAL_ERROR,
                   step, (), message, name, trace)

    @classmethod
    def stopped(cls, rule: str, signum: int, *, step: int | None = None,
                fired_steps: Sequence[int] = ()) -> RuleOutcome:
        return cls(rule, RuleStatus.STOPPED, 128 + signum, step, tuple(fired_steps),
                   STOPPED_MESSAGE)


def _severity(outcome: RuleOutcome) -> int:
    if outcome.status is RuleStatus.STOPPED:
        return 5
    return {EXIT_INTERNAL_ERROR: 4, EXIT_CLIENT_ERROR: 3, EXIT_ISSUES_FOUND: 2}.get(
        outcome.exit_code, 1)


def _by_severity(outcomes: Iterable[RuleOutcome]) -> list[RuleOutcome]:
    return sorted(outcomes, key=_severity, reverse=True)  # stable: rule order within a rank


def overall_exit_code(outcomes: Iterable[RuleOutcome]) -> int:
    """The exit code of the most severe outcome (0 for none); see the module docstring."""
    ranked = _by_severity(outcomes)
    return ranked[0].exit_code if ranked else EXIT_NO_ISSUES


def overall_status(outcomes: Iterable[RuleOutcome]) -> RuleStatus:
    ranked = _by_severity(outcomes)
    return ranked[0].status if ranked else RuleStatus.NO_ISSUES_FOUND


def combined_message(outcomes: Iterable[RuleOutcome]) -> str | None:
    """The message file's text: one rule's message as is, several one per line, most severe
    first; None when no rule has one. Cut to ``MESSAGE_LIMIT`` bytes."""
    # A message several rules share (a parameter no rule of the run takes) is said once.
    texts = list(dict.fromkeys(o.message for o in _by_severity(outcomes) if o.message))
    if not texts:
        return None
    text = texts[0] if len(texts) == 1 else "".join(t if t.endswith("\n") else t + "\n"
                                                    for t in texts)
    return truncate_utf8(text)




def write_status_files(message_dir: Path, text: str) -> bool:
    """Write ``message`` and ``failure`` into ``message_dir`` when it exists and is writable;
    otherwise (a local run without /opt/ml) skip silently. Returns whether both were written."""
    if not message_dir.is_dir() or not os.access(message_dir, os.W_OK):
        return False
    data = truncate_utf8(text).encode("utf-8", errors="backslashreplace")
    try:
        for name in ("message", "failure"):
            write_atomically(message_dir / name, data, tmp_dir=message_dir)
    except OSError:
        return False
    return True


class EvidenceSource(Protocol):
    """What a rule checked (``evaluator.rules.evidence.Evidence``)."""

    def summary(self) -> dict[str, Any]: ...

    def counts(self) -> dict[str, int]: ...


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class _RuleState:
    name: str
    key: str
    parameters: dict[str, str]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps_evaluated: int = 0
    last_step: int | None = None
    newest_step: int | None = None
    fired_steps: list[int] = field(default_factory=list)
    outcome: RuleOutcome | None = None
    evidence: EvidenceSource | None = None
    started_clock: float = 0.0
    window_start: float = 0.0  # a progress line's rate is measured since the previous line
    window_count: int = 0

    @property
    def status(self) -> RuleStatus | None:
        if self.outcome is not None:
            return self.outcome.status
        return RuleStatus.IN_PROGRESS if self.started_at is not None else None


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
        progress_interval: float = 10.0,
        console: bool = False,
        stream: TextIO | None = None,
        logger: Any = None,
        listeners: Sequence[Callable[[Mapping[str, Any]], None]] = (),
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._rules = {state.key: state for state in map(self._state, rules)}
        self._output_dir = output_dir
        self._message_dir = message_dir
        self._trial = trial
        self._progress_interval = progress_interval
        self._console = console
        self._stream = stream if stream is not None else sys.stdout
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")
        self._listeners = tuple(listeners)
        self._clock = clock
        self._now = now
        self._lock = threading.RLock()
        self._started_at = now()
        self._finished_at: datetime | None = None
        self._exit_code: int | None = None
        self._drawn_at: float | None = None
        self._result_write_failed = False

    @classmethod
    def from_config(cls, config: EvaluatorConfig, **kwargs: Any) -> StatusReporter:
        """A reporter for ``config``'s rules and folders; the console display is used when the
        log format is console and the stream is a terminal."""
        stream = kwargs.get("stream") or sys.stdout
        kwargs.setdefault("console", config.log_format == "console" and stream.isatty())
        return cls(config.rules, output_dir=config.output_dir, message_dir=config.message_dir,
                   trial=config.base_trial, progress_interval=config.progress_interval, **kwargs)

    @staticmethod
    def _state(rule: RuleSpec | str) -> _RuleState:
        if isinstance(rule, str):
            return _RuleState(rule, rule, {})
        return _RuleState(rule.name, rule.configuration_name, rule.redacted_parameters())

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

    def attach_evidence(self, rule: str, evidence: EvidenceSource) -> None:
        """Where the rule records what it checked: shown in progress lines and the result."""
        with self._lock:
            self._rules[rule].evidence = evidence

    def fired(self, rule: str, step: int, *, reasons: Sequence[Mapping[str, Any]] = ()) -> None:
        """The rule's condition was met at ``step`` (status follows at ``finish``);
        ``reasons`` are the firing comparisons (``Check.to_dict()``)."""
        with self._lock:
            state = self._rules[rule]
            state.fired_steps.append(step)
            self._clear_line()
            extra = {"reasons": [r.get("sentence") for r in reasons]} if reasons else {}
            self._log.info("rule_fired", rule=state.key, step=step,
                           message=condition_met_message(state.name, step).rstrip("\n"),
                           **extra)

    def finish(self, rule: str) -> RuleOutcome:
        """The rule ended normally: IssuesFound if it fired, else NoIssuesFound."""
        with self._lock:
            state = self._rules[rule]
            return self._end(state, RuleOutcome.finished(state.name, state.fired_steps,
                                                         last_step=state.last_step))

    def fail(self, rule: str, error: BaseException, *, client: bool | None = None,
             ) -> RuleOutcome:
        """The rule ended with ``error``; see ``RuleOutcome.from_error`` for ``client``."""
        with self._lock:
            state = self._rules[rule]
            return self._end(state, RuleOutcome.from_error(state.name, error, client=client,
                                                           step=state.last_step), error)

    def set_parameters(self, rule: str, parameters: Mapping[str, str | None]) -> None:
        """The parameters the rule was built with (defaults included) replace the given ones
        in the result file, secrets masked."""
        from evaluator.config import redact_parameters  # kept local: this method's only need

        with self._lock:
            self._rules[rule].parameters = redact_parameters(parameters)  # type: ignore[arg-type]
            self._write_result()

    def stop(self, signum: int) -> None:
        """Mark every rule still running (or not yet started) Stopped."""
        with self._lock:
            for state in self._rules.values():
                if state.outcome is None:
                    self._end(state, RuleOutcome.stopped(state.name, signum, step=state.last_step,
                                                         fired_steps=state.fired_steps))

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
            if message is not None and self._message_dir is not None:
                write_status_files(self._message_dir, message)
            self._write_result()
            self._clear_line()
            self._log.info("evaluation_finished", status=overall_status(outcomes).value,
                           exit_code=self._exit_code,
                           rules={s.key: s.outcome.status.value for s in self._rules.values()
                                  if s.outcome is not None})
            return self._exit_code

    @property
    def outcomes(self) -> list[RuleOutcome]:
        return [s.outcome for s in self._rules.values() if s.outcome is not None]

    # ---- internals ------------------------------------------------------------------------

    def _end(self, state: _RuleState, outcome: RuleOutcome,
             error: BaseException | None = None) -> RuleOutcome:
        if state.outcome is None:
            state.outcome = outcome
            state.finished_at = self._now()
            self._status_changed(state, error)
        return state.outcome

    def _status_changed(self, state: _RuleState, error: BaseException | None = None) -> None:
        outcome = state.outcome
        fields: dict[str, Any] = {
            "rule": state.key, "status": state.status.value if state.status else None,
            "step": outcome.step if outcome else state.last_step,
            "message": outcome.message if outcome else None,
        }
        if outcome is not None:
            fields.update(steps_evaluated=state.steps_evaluated,
                          fired_steps=list(state.fired_steps),
                          exit_code=outcome.exit_code)
        if outcome is not None and outcome.error_type:
            fields["error_type"] = outcome.error_type
        self._clear_line()
        log = self._log.error if outcome and outcome.status is RuleStatus.ERROR else self._log.info
        if error is not None and outcome is not None and outcome.traceback:
            log("rule_status", **fields, exc_info=error)  # a rule's own bug: show where
        else:
            log("rule_status", **fields)
        for listener in self._listeners:
            try:
                listener({"event": "rule_status", "timestamp": _iso(self._now()), **fields})
            except Exception:  # a sink must never change the verdict
                self._log.warning("status_listener_failed", exc_info=True)
        self._write_result()

    @staticmethod
    def _progress_fields(state: _RuleState, rate: float) -> dict[str, Any]:
        lag = (state.newest_step - state.last_step
               if state.newest_step is not None and state.last_step is not None else None)
        counts = state.evidence.counts() if state.evidence is not None else {}
        return {"rule": state.key, "step": state.last_step,
                "steps_evaluated": state.steps_evaluated,
                "steps_per_sec": round(rate, 2), "lag_steps": lag, **counts}

    def _draw(self, now: float) -> None:
        parts = []
        for state in self._rules.values():
            elapsed = now - state.started_clock
            p = self._progress_fields(state, state.steps_evaluated / elapsed if elapsed > 0 else 0)
            lag = f", {p['lag_steps']} behind" if p["lag_steps"] else ""
            parts.append(f"{state.key}: step {p['step']} ({p['steps_evaluated']} steps, "
                         f"{p['steps_per_sec']:g}/s{lag})" if state.outcome is None
                         else f"{state.key}: {state.outcome.status.value}")
        self._stream.write("\r" + " | ".join(parts) + "\x1b[K")
        self._stream.flush()
        self._drawn_at = now

    def _clear_line(self) -> None:
        if self._console and self._drawn_at is not None:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn_at = None

    def _rule_document(self, state: _RuleState) -> dict[str, Any]:
        o = state.outcome
        return {
            "rule": state.name, "configuration_name": state.key,
            "status": state.status.value if state.status else None,
            "exit_code": o.exit_code if o else None,
            "step": o.step if o else state.last_step,
            "fired_steps": list(state.fired_steps),
            "steps_evaluated": state.steps_evaluated,
            "details": o.message if o else None,
            "error_type": o.error_type if o else None,
            "traceback": o.traceback if o else None,
            "parameters": state.parameters,
            "evidence": state.evidence.summary() if state.evidence is not None else None,
            "started_at": _iso(state.started_at), "finished_at": _iso(state.finished_at),
        }

    def _document(self) -> dict[str, Any]:
        rules = [self._rule_document(s) for s in self._rules.values()]
        done = self._exit_code is not None
        doc: dict[str, Any] = {
            "version": 1,
            "status": overall_status(self.outcomes).value if done else "InProgress",
            "exit_code": self._exit_code,
            "message": combined_message(self.outcomes) if done else None,
            "trial": self._trial,
            "started_at": _iso(self._started_at), "finished_at": _iso(self._finished_at),
            "rules": rules,
        }
        if len(rules) == 1:
            doc.update({k: rules[0][k] for k in ("rule", "step", "fired_steps", "details",
                                                  "parameters", "evidence")})
        return doc

    def _write_result(self) -> None:
        if self._output_dir is None:
            return
        # ASCII escapes keep the file valid UTF-8 even when a path or value given on the command
        # line holds bytes that are not (they reach Python as lone surrogates).
        data = json.dumps(self._document(), indent=2, ensure_ascii=True).encode("ascii")
        try:
            write_atomically(self._output_dir / RESULT_FILE_NAME, data,
                          tmp_dir=self._output_dir / _IGNORED_DIR)
        except OSError as e:
            if not self._result_write_failed:  # say it once, not at every status change
                self._result_write_failed = True
                self._log.warning("result_file_not_written", path=str(self._output_dir),
                                  error=str(e))


# ---- logging --------------------------------------------------------------------------------


class _ClampFilter(logging.Filter):
    """Drops records below INFO from the AWS/HTTP libraries, whatever their level was set to."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        return not any(record.name == n or record.name.startswith(n + ".")
                       for n in _CLAMPED_LOGGERS)


def configure_logging(*, level: str | int = "INFO", log_format: str = "json",
                      stream: TextIO | None = None) -> logging.Handler:
    """Route structlog and stdlib logging through one handler on ``stream`` (stdout): one JSON
    object per line, or structlog's console rendering. Replaces the handler an earlier call
    installed. botocore, aiobotocore, boto3, urllib3 and s3transfer never log below INFO."""
    numeric = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.processors.StackInfoRenderer(),
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    stream = stream if stream is not None else sys.stdout
    if hasattr(stream, "reconfigure"):  # never die printing a value that is not valid UTF-8
        stream.reconfigure(errors="backslashreplace")
    renderer: list[Any] = (
        [structlog.dev.ConsoleRenderer(colors=stream.isatty())] if log_format == "console"
        else [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()])
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer]))
    handler.addFilter(_ClampFilter())
    handler.set_name("evaluator")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "evaluator"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CLAMPED_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.INFO))
    return handler
