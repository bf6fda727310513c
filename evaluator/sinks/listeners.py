"""Listeners as a sink: plain callables that take each event as a mapping (``event``,
``timestamp`` and the event's fields), the simplest way to hear a run. ``rule_status`` comes
with a status change, ``rule_fired`` and ``evaluation_finished`` once the result file holds
them, with ``result_file`` and each rule's ``evidence`` (the objects the rules record into, by
configuration name). A listener's failure is logged, never raised."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from evaluator.sinks.events import EvaluationEnded, NullSink, RuleFired, StatusChanged
from evaluator.sinks.log_events import status_fields
from evaluator.status.files import iso

__all__ = ["Listener", "ListenerSink"]

Listener = Callable[[Mapping[str, Any]], None]


class ListenerSink(NullSink):
    essential = True  # (it keeps its listeners' failures to itself)

    def __init__(
        self, listeners: Sequence[Listener], *, now: Callable[[], datetime], logger: Any = None
    ) -> None:
        self._listeners = tuple(listeners)
        self._now = now
        self._log = logger if logger is not None else structlog.get_logger("evaluator.status")

    def status_changed(self, event: StatusChanged) -> None:
        self._notify("rule_status", status_fields(event.rule))

    def rule_fired(self, event: RuleFired) -> None:
        run = event.run
        self._notify(
            "rule_fired",
            {
                "rule": event.rule.key,
                "step": event.rule.shown(event.step).step,
                "result_file": run.result_file(),
                "evidence": run.evidence(),
            },
        )

    def evaluation_ended(self, event: EvaluationEnded) -> None:
        run = event.run
        self._notify(
            "evaluation_finished",
            {
                "exit_code": event.verdict.exit_code,
                "result_file": run.result_file(),
                "evidence": run.evidence(),
            },
        )

    def _notify(self, event: str, fields: Mapping[str, Any]) -> None:
        for listener in self._listeners:
            try:
                listener({"event": event, "timestamp": iso(self._now()), **fields})
            except Exception:  # a listener must never change the verdict
                self._log.warning("status_listener_failed", exc_info=True)
