"""The listener interface of a run: the events every output hears, and ``Sink``, the one
protocol each output (``evaluator.sinks.*``) implements.

``StatusReporter`` (``evaluator.reporting``) follows the rules of a run in a ``RunRecord``
and tells its sinks, in their order, what happened:

* ``evaluation_started``: the trial is being opened (what is read, what ends the run);
* ``status_changed``: a rule started or reached its outcome;
* ``step_judged``: a rule evaluated one more step;
* ``rule_fired`` / ``rule_noted``: a rule's condition was met at a step (with the rule's
  actions it calls for, which the sink that ``runs_actions`` runs), or kept as a note;
* ``evaluation_ending`` then ``evaluation_ended``: the verdict is recorded (the result file,
  which may turn it into an internal error when it cannot be written, and the message files),
  then announced (the verdict line, the report, anything else);
* ``run_closed``: the supervisor's own last word (``container.last_word``), when the
  evaluation ended without a verdict that can be taken (killed, a step over
  ``rule_step_timeout``, stopped): every process of the run is dead by then.

A sink overrides the methods it needs (``NullSink`` does nothing for the others). A sink that
is not ``essential`` never changes the verdict: its failure is logged and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import structlog

from evaluator.status.files import EvidenceSource, RuleRecord

__all__ = [
    "EvaluationEnded",
    "EvaluationStarted",
    "NullSink",
    "RuleFired",
    "RuleNoted",
    "RuleState",
    "RunClosed",
    "RunRecord",
    "Sink",
    "Sinks",
    "StatusChanged",
    "StepJudged",
    "Verdict",
]


@dataclass
class RuleState(RuleRecord):
    """A rule's record, and what its progress lines are measured from."""

    newest_step: int | None = None
    secrets: frozenset[str] = frozenset()  # parameter values no text may show
    started_clock: float = 0.0
    window_start: float = 0.0  # a progress line's rate is measured since the previous line
    window_count: int = 0
    notes_logged: int = 0


@dataclass
class RunRecord:
    """What the run knows so far: each rule's state (by configuration name) and the run's."""

    rules: dict[str, RuleState]
    trial: str | None
    run_key: str | None
    started_at: datetime
    resumed: dict[str, int | None] = field(default_factory=dict)
    finished_at: datetime | None = None
    exit_code: int | None = None
    data_problems: Callable[[], tuple[int, list[dict[str, Any]]]] | None = None
    result_file: Callable[[], str | None] = lambda: None  # as written (absolute), or None

    def problems(self) -> tuple[int, list[dict[str, Any]]]:
        """How many event files were skipped, and which (none when nobody watches them)."""
        if self.data_problems is None:
            return 0, []
        try:
            return self.data_problems()
        except Exception:  # a report of problems must never become one
            return 0, []

    def evidence(self) -> dict[str, EvidenceSource]:
        return {s.key: s.evidence for s in self.rules.values() if s.evidence is not None}


@dataclass(frozen=True)
class EvaluationStarted:
    run: RunRecord
    fields: Mapping[str, Any]  # the trial, where it came from, what ends the run, ...


@dataclass(frozen=True)
class StatusChanged:
    run: RunRecord
    rule: RuleState
    error: BaseException | None = None  # the rule's own exception, when it may be shown


@dataclass(slots=True)
class StepJudged:
    run: RunRecord
    rule: RuleState
    clock: float  # the reporter's clock when the step was counted


@dataclass(frozen=True)
class RuleFired:
    run: RunRecord
    rule: RuleState
    step: int
    reasons: Sequence[Mapping[str, Any]] = ()  # the firing comparisons (Check.to_dict())
    actions: Callable[[], None] | None = None  # the rule's actions to run (evaluator.sinks.actions)


@dataclass(frozen=True)
class RuleNoted:
    run: RunRecord
    rule: RuleState
    step: int
    notes: Sequence[Mapping[str, Any]]
    last: bool  # the last note line this rule logs (the result file counts the others)


@dataclass
class Verdict:
    """The run's exit code and the message SageMaker shows (None: no message files)."""

    exit_code: int
    message: str | None


@dataclass(frozen=True)
class EvaluationEnded:
    run: RunRecord
    verdict: Verdict  # may be made an internal error while the verdict is recorded


@dataclass(frozen=True)
class RunClosed:
    """The supervisor's last word: ``text`` for the run and every rule still unfinished
    (``others_text`` for all but ``culprit``); ``force``: a verdict the file already holds is
    replaced at the run level. ``result_dir`` is the output folder (None: none was opened)."""

    status: str
    exit_code: int
    text: str
    result_dir: str | None = None
    error_type: str | None = None
    culprit: str | None = None
    others_text: str | None = None
    force: bool = False
    stopped: bool = False  # a stop signal ended the run


class NullSink:
    """A ``Sink`` that does nothing: subclass it and override what an output needs."""

    essential: ClassVar[bool] = False
    #: This sink runs the rule actions a firing carries (``RuleFired.actions``).
    runs_actions: ClassVar[bool] = False

    def evaluation_started(self, event: EvaluationStarted) -> None:
        return None

    def status_changed(self, event: StatusChanged) -> None:
        return None

    def step_judged(self, event: StepJudged) -> None:
        return None

    def rule_fired(self, event: RuleFired) -> None:
        return None

    def rule_noted(self, event: RuleNoted) -> None:
        return None

    def evaluation_ending(self, event: EvaluationEnded) -> None:
        return None

    def evaluation_ended(self, event: EvaluationEnded) -> None:
        return None

    def run_closed(self, event: RunClosed) -> None:
        return None

    def wait(self) -> None:
        """The verdict is out: finish what this sink started, within a few seconds."""
        return None


Sink = NullSink
"""The protocol of an output: ``NullSink``'s methods (a sink subclasses it)."""


class Sinks:
    """The outputs of one run, told each event in their order. An ``essential`` sink's error
    is the run's (as a bug of ours); any other's is logged, never raised. A sink is only called
    for the events it overrides (a step judged is the hot path)."""

    def __init__(self, sinks: Sequence[NullSink], *, logger: Any = None) -> None:
        self.sinks: list[NullSink] = []
        self._calls: dict[str, list[tuple[bool, Callable[[Any], None]]]] = {}
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")
        for sink in sinks:
            self.add(sink)

    @property
    def runs_actions(self) -> bool:
        """Whether one of the sinks runs the rule actions a firing carries."""
        return any(sink.runs_actions for sink in self.sinks)

    def add(self, sink: NullSink) -> None:
        self.sinks.append(sink)
        for method in _EVENTS:
            if getattr(type(sink), method) is not getattr(NullSink, method):
                call = (sink.essential, getattr(sink, method))
                self._calls.setdefault(method, []).append(call)

    def wait(self) -> None:
        """Let each sink finish what it started (``NullSink.wait``); never raises."""
        for sink in self.sinks:
            try:
                sink.wait()
            except Exception:  # an output must never change the verdict
                self._log.warning("status_listener_failed", exc_info=True)

    def emit(self, method: str, event: Any) -> None:
        for essential, call in self._calls.get(method, ()):
            if essential:
                call(event)
                continue
            try:
                call(event)
            except Exception:  # an output must never change the verdict
                self._log.warning("status_listener_failed", exc_info=True)


_EVENTS = (
    "evaluation_started",
    "status_changed",
    "step_judged",
    "rule_fired",
    "rule_noted",
    "evaluation_ending",
    "evaluation_ended",
    "run_closed",
)
