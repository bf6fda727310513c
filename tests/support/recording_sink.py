"""A sink written for the tests, as a user would write a webhook: one module with a
``NullSink`` subclass and a factory to register (``container.compose.register_sink``). It
appends each event it hears, as one JSON line, to the file ``EVALUATOR_RECORDING_SINK`` names
(no variable: no sink)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from container.compose import SinkContext
from evaluator.sinks import (
    EvaluationEnded,
    EvaluationStarted,
    NullSink,
    RuleFired,
    RunClosed,
    StatusChanged,
    StepJudged,
)

ENV = "EVALUATOR_RECORDING_SINK"


class RecordingSink(NullSink):
    def __init__(self, path: Path, *, supervisor: bool) -> None:
        self.path = path
        self.supervisor = supervisor

    def _write(self, kind: str, **fields: Any) -> None:
        line = {"event": kind, "supervisor": self.supervisor, **fields}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    def evaluation_started(self, event: EvaluationStarted) -> None:
        self._write("evaluation_started", trial=event.fields.get("trial"))

    def status_changed(self, event: StatusChanged) -> None:
        status = event.rule.status
        self._write("status_changed", rule=event.rule.key, status=status and status.value)

    def step_judged(self, event: StepJudged) -> None:
        self._write("step_judged", rule=event.rule.key, step=event.rule.last_step)

    def rule_fired(self, event: RuleFired) -> None:
        self._write("rule_fired", rule=event.rule.key, step=event.step)

    def evaluation_ended(self, event: EvaluationEnded) -> None:
        self._write("evaluation_ended", exit_code=event.verdict.exit_code)

    def run_closed(self, event: RunClosed) -> None:
        self._write("run_closed", status=event.status, exit_code=event.exit_code, text=event.text)


def recording_sink(context: SinkContext) -> RecordingSink | None:
    """The factory to register: a sink when ``EVALUATOR_RECORDING_SINK`` is set."""
    target = context.environ.get(ENV)
    return RecordingSink(Path(target), supervisor=context.supervisor) if target else None


def recorded(path: Path) -> list[dict[str, Any]]:
    """The events the sink wrote to ``path``."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
