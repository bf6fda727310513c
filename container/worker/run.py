"""One run in a shared worker: exactly a single run's evaluation (``container.cli.run`` on the
run's arguments and environment: its configuration, reporter, sinks, ``Evaluation`` and
trial), on a thread of its own, in a context of its own whose output is the run's log
(``container.worker.routing``), with its own stop.

A run whose rules are not all built-in, or that sets ``rule_step_timeout``, is refused as
soon as its configuration is read, before anything is loaded or written: a user's rule code
gets a process of its own, and a step that hangs can only be ended by killing a process
(the watch starts such a run as it starts any run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any

from container.signals import StopSignals
from container.worker.routing import run_context
from evaluator.config import EvaluatorConfig

__all__ = ["NotShared", "PooledRun"]

Tell = Callable[[dict[str, Any]], None]


class NotShared(BaseException):  # noqa: N818 - not an error: the run belongs elsewhere
    """The run cannot share the worker (raised through ``container.cli.run``, which turns
    every ``Exception`` into the run's internal error)."""


class PooledRun:
    """``rule-evaluator ARGV`` with ``env``, its output appended to ``log_fd`` (taken);
    ``tell`` says ``outputs``, ``refused`` and ``ended`` to the watch."""

    def __init__(
        self, name: str, argv: Sequence[str], env: Mapping[str, str], log_fd: int, tell: Tell
    ) -> None:
        self.name = name
        self.argv, self.env = list(argv), dict(env)
        self.stream = open(  # noqa: SIM115 - closed when the run ends
            log_fd, "a", buffering=1, encoding="utf-8", errors="backslashreplace"
        )
        self.signals = StopSignals(raise_in_main=False)  # never installed: the worker stops it
        self._tell = tell
        context = run_context(self.stream)
        self.thread = threading.Thread(
            target=context.run, args=(self._run,), name=f"run {name}"[:64], daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self, signum: int) -> None:
        """End the run ``Stopped`` (``signum``: its exit code's), as a signal ends a single run."""
        if self.signals.signum is None:
            self.signals.signum = signum
        self.signals.stop.set()

    def _run(self) -> None:
        from container.cli import run

        code: int | None = 3
        try:
            code = run(self.argv, signals=self.signals, environ=self.env, on_config=self._check)
        except NotShared as why:
            code = None
            self._tell({"refused": self.name, "why": str(why)})
        finally:
            with suppress(OSError):  # the log file is this run's; closing it is all we do
                self.stream.close()
            if code is not None:
                self._tell({"ended": self.name, "code": code})

    def _check(self, config: EvaluatorConfig) -> None:
        """Refuse a run that needs a process of its own; else tell the watch where its files
        go (for its last word, should the worker die before its verdict)."""
        from container.cli import outputs_fields

        own = [spec.configuration_name for spec in config.rules if spec.source is not None]
        if own:
            raise NotShared(f"rules with code of their own ({', '.join(own)})")
        if config.rule_step_timeout is not None:
            raise NotShared("rule_step_timeout is set (a step overrun ends a whole process)")
        self._tell({"outputs": self.name, "state": outputs_fields(config)})
