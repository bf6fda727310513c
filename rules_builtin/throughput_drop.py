"""ThroughputDrop: a logged throughput (samples, tokens or steps per second) far below its own
running median for some logged values in a row."""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import Diagnosis
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from rules_builtin.registry import register

__all__ = ["ThroughputDrop"]

THROUGHPUT = (
    r"(?i)(samples?|tokens?|steps?|batch(es)?|items?|iter(ation)?s?|images?)[_/ -]?per[_/ -]?"
    r"(second|sec|s)$|throughput|(samples|tokens|steps|it)/s$"
)
SLOWER = "slower"  # the diagnosis of a drop


@dataclass
class _Series:
    window: deque[float]
    run: int = 0
    first_low: int | None = None  # the mode step the current run of low values began


@register
class ThroughputDrop(Rule):
    """Fires at a step where a throughput has been below ``fraction`` of its running median
    for ``patience`` logged values in a row.

    Tensors: scalars named like a throughput (``tensor_regex`` to choose): Hugging Face's
    ``train_samples_per_second`` / ``eval/samples_per_second`` / ``eval/steps_per_second``,
    Lightning's ``ThroughputMonitor`` (``samples_per_sec``, ``batches_per_sec``,
    ``items_per_sec``), ``tokens_per_second``, ``throughput``, ``it/s``; every mode, each
    (tensor, mode) its own series (training and evaluation speeds differ).

    The running median is that of the last ``window`` values that were not low (at least 3
    before the first check); a low value does not join it, so a lasting slowdown stays low
    against the speed before it. Evidence per logged value: ``logged values in a row below
    fraction x the running median`` against ``patience`` (fires when ``>=``); the throughput
    and its bound are charted. Diagnosis ``slower``: the speed before and now, and since
    which step.

    Wall time: TensorBoard events carry the time they were written (``wall_time``), but the
    trial does not expose it (``Tensor`` gives values by step, as smdebug's does), so the gap
    between logged steps cannot stand in for an unlogged throughput: a run that logs none
    ends "Insufficient information", naming what to log. The default ``fraction`` 0.4 is
    below a dip one healthy Hugging Face run logs (its evaluation speed at 0.48 of its median
    for 9 evaluations, a shared machine; bench/STABILITY.md): a 2.5-fold slowdown.
    """

    PARAMETERS = (
        Param("tensor_regex", None, "list", "Regular expressions of throughput tensors."),
        Param("fraction", "0.4", "float", "A value below this share of the median is low."),
        Param("patience", "3", "int", "Fire after this many low values in a row."),
        Param("window", "20", "int", "Values the running median is taken over."),
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | None = None,
        fraction: str | float = "0.4",
        patience: str | int = "3",
        window: str | int = "20",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, None, tensor_regex or THROUGHPUT)
        self.fraction = parse_float(name, "fraction", fraction, minimum=0)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.window = parse_int(name, "window", window, minimum=1)
        self._series: dict[tuple[str, ModeKeys], _Series] = {}

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode is None or mode_step is None:
            return False
        fired = False
        for name, value in self.selection.scalars_at(self.base_trial, step):
            fired = self._check(name, step, mode, mode_step, value) or fired
        return fired

    def _check(self, name: str, step: int, mode: ModeKeys, at: int, value: float) -> bool:
        s = self._series.setdefault((name, mode), _Series(deque(maxlen=self.window)))
        self.evidence.record(step, name, quantity="throughput", value=value, mode=mode)
        if len(s.window) < 3:
            s.window.append(value)
            return False
        median = float(statistics.median(s.window))
        bound = self.fraction * median
        self.evidence.record(step, name, quantity="throughput bound", value=bound, mode=mode)
        low = not value >= bound  # a NaN throughput is low too
        s.run = s.run + 1 if low else 0
        if low:
            s.first_low = at if s.run == 1 else s.first_low
        else:
            s.window.append(value)
        run, since = s.run, s.first_low
        where = f"{mode.name} step {at}" if mode != ModeKeys.GLOBAL else f"step {at}"
        return bool(
            self.evidence.compare(
                step,
                name,
                quantity="logged values in a row below fraction x the running median",
                value=run,
                parameter="patience",
                threshold=self.patience,
                fires_when=">=",
                mode=mode,
                mode_step=at,
                sentence=lambda: (
                    f"{self.rule_name}: {name} = {value:.4g} at {where}: {run} logged value(s) in "
                    f"a row below {self.fraction:g} x its running median {median:.4g} "
                    f"(last {self.window} values)"
                ),
                diagnose=lambda: Diagnosis(
                    SLOWER,
                    f"{name} fell from a median of {median:.4g} to {value:.4g} "
                    f"({value / median:.0%} of it) and has stayed low for {run} logged values "
                    f"since {mode.name} step {since}: check the data loading, the machine "
                    "(throttling, a shared device) and the logging or checkpointing cost",
                    {
                        "median": median,
                        "value": value,
                        "since_mode_step": since or at,
                        "values_low": run,
                    },
                ),  # fmt: skip
            )
        )
