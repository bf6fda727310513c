"""LearningRateSchedule: a learning rate of 0 or NaN during training, or (optionally) one still
rising after its warm-up or rising again after it decayed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import DIVERGING, NOT_LEARNING, Diagnosis
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import step_in_mode
from evaluator.rules.kit.params import (
    Param,
    parse_bool,
    parse_float,
    parse_int,
    parse_optional_int,
)
from evaluator.rules.kit.selection import TensorSelection, percent_of
from evaluator.rules.rule import Rule
from rules_builtin.registry import register

__all__ = ["LearningRateSchedule"]

TRAIN = ModeKeys.TRAIN
LEARNING_RATE = r"(?i)(learning[_-]?rate|(^|[/_.-])lr([/_.-]|$))"
SCHEDULE = "schedule"  # the diagnosis of a schedule that does not do what it should


@dataclass
class _Schedule:
    previous: float | None = None
    zeros: int = 0  # logged values in a row at 0
    decayed: bool = False  # it has gone down since its peak
    peak: float = 0.0


@register
class LearningRateSchedule(Rule):
    """Fires at a training step where a learning rate is 0 for ``patience`` logged values in
    a row, or NaN or infinite; and, when asked, where it still rises after its warm-up or
    rises again after it decayed.

    Tensors: scalars named like a learning rate (Hugging Face's ``train/learning_rate``,
    Lightning's ``lr-Adam`` / ``lr-SGD/pg1``, Keras' ``epoch_learning_rate``, smdebug's
    ``learning_rate``), or ``tensor_regex``; TRAIN values (a trial without modes counts as
    training). Each tensor is a series.

    Checks, each recorded as evidence per logged value:

    * ``logged values in a row at 0`` against ``patience`` (default 2, fires when ``>=``):
      a schedule decaying to 0 logs a single 0 at its very end (and a cyclic one at each
      cycle end, Hugging Face runs restarted per epoch); a warm-up starting at 0 logs one 0
      at its start; ``patience`` 2 lets both pass and fires on the second 0 of a learning
      rate that stays at 0 (nothing is learnt from then on). A NaN or infinite learning
      rate fires at once (``non-finite learning rate`` against 0).
    * with ``total_steps`` set (training steps of the run, in the trial's TRAIN steps): after
      ``warmup_fraction`` of them, ``rise (%)`` of a value over the previous one while the
      learning rate has not yet decayed, against ``rise_tolerance_percent`` (fires when
      ``>``): a warm-up that runs too long (a warm-up set in steps on a run counted in
      epochs, or the reverse).
    * with ``allow_restarts=False``: the same ``rise (%)``, after the learning rate has gone
      down from its peak: a schedule restarting where none is expected (a scheduler stepped
      per epoch and per batch, a second ``trainer.train()``). Warm restarts (SGDR, cyclic
      schedules) are expected by default.

    Diagnosis: ``not_learning`` for a learning rate of 0, ``diverging`` for NaN, and
    ``schedule`` for a rise, with the values compared.
    """

    PARAMETERS = (
        Param("tensor_regex", None, "list", "Regular expressions of learning-rate tensors."),
        Param("patience", "2", "int", "Fire after this many logged values in a row at 0."),
        Param("total_steps", None, "int", "Training steps of the run: checks the warm-up end."),
        Param("warmup_fraction", "0.1", "float", "Warm-up share of total_steps."),
        Param("allow_restarts", "True", "bool", "False: a rise after the decay fires."),
        Param("rise_tolerance_percent", "1", "float", "A smaller rise is not a rise."),
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | None = None,
        patience: str | int = "2",
        total_steps: str | int | None = None,
        warmup_fraction: str | float = "0.1",
        allow_restarts: str | bool = "True",
        rise_tolerance_percent: str | float = "1",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, None, tensor_regex or LEARNING_RATE)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.total_steps = parse_optional_int(name, "total_steps", total_steps, minimum=1)
        self.warmup_fraction = parse_float(name, "warmup_fraction", warmup_fraction, minimum=0)
        self.allow_restarts = parse_bool(name, "allow_restarts", allow_restarts)
        self.tolerance = parse_float(
            name, "rise_tolerance_percent", rise_tolerance_percent, minimum=0
        )
        self._schedules: dict[str, _Schedule] = {}

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        found = step_in_mode(self.base_trial, step)
        if found is None:
            return False
        mode_step = found[1]
        fired = False
        for name, value in self.selection.scalars_at(self.base_trial, step):
            self.evidence.record(step, name, quantity="learning rate", value=value, mode=TRAIN)
            fired = self._check(name, step, mode_step, value) or fired
        return fired

    def _check(self, name: str, step: int, at: int, value: float) -> bool:
        s = self._schedules.setdefault(name, _Schedule())
        where = f"TRAIN step {at}"
        compare = self.evidence.compare
        if not math.isfinite(value):
            return bool(
                compare(
                    step,
                    name,
                    quantity="non-finite learning rate",
                    value=1,
                    parameter="non-finite values allowed",
                    threshold=0,
                    fires_when=">",
                    mode=TRAIN,
                    mode_step=at,
                    sentence=lambda: f"{self.rule_name}: {name} is {value} at {where}",
                    diagnose=lambda: Diagnosis(
                        DIVERGING,
                        f"the learning rate became {value} at {where}: the run diverged",
                        {"value": str(value)},
                    ),
                )  # fmt: skip
            )
        s.zeros = s.zeros + 1 if value == 0 else 0
        zeros = s.zeros
        fired = bool(
            compare(
                step,
                name,
                quantity="logged values in a row at 0",
                value=zeros,
                parameter="patience",
                threshold=self.patience,
                fires_when=">=",
                mode=TRAIN,
                mode_step=at,
                sentence=lambda: (
                    f"{self.rule_name}: {name} has been 0 for {zeros} "
                    f"logged values in a row at {where}"
                ),
                diagnose=lambda: Diagnosis(
                    NOT_LEARNING,
                    f"the learning rate has been 0 "
                    f"for {zeros} logged values (at {where}): the "
                    "weights no longer change; check the scheduler "
                    "(its total steps, its step calls)",
                    {"zeros_in_a_row": zeros},
                ),
            )  # fmt: skip
        )
        fired = self._rise(name, step, at, value, s) or fired
        s.decayed = s.decayed or (s.peak > 0 and value < s.peak * (1 - self.tolerance / 100))
        s.peak = max(s.peak, value)
        s.previous = value
        return fired

    def _rise(self, name: str, step: int, at: int, value: float, s: _Schedule) -> bool:
        """The rise checks (``total_steps``, ``allow_restarts``) against the previous value."""
        previous = s.previous
        if previous is None or previous < 0:
            return False
        if s.decayed:
            if self.allow_restarts:
                return False
            what = "rises again after it decayed (a restart where none is expected)"
        else:
            if self.total_steps is None or at <= self.warmup_fraction * self.total_steps:
                return False
            end = self.warmup_fraction * self.total_steps
            what = f"still rises after its warm-up ({self.warmup_fraction:g} x {self.total_steps} = step {end:g})"
        rise = percent_of(value - previous, previous)  # from 0: +inf
        return bool(
            self.evidence.compare(
                step,
                name,
                quantity="rise (%) over the previous value",
                value=rise,
                parameter="rise_tolerance_percent",
                threshold=self.tolerance,
                fires_when=">",
                mode=TRAIN,
                mode_step=at,
                sentence=lambda: (
                    f"{self.rule_name}: {name} {what}: "
                    f"{previous:.4g} to {value:.4g} at TRAIN "
                    f"step {at}"
                ),
                diagnose=lambda: Diagnosis(
                    SCHEDULE,
                    f"the learning rate {what}; check the scheduler's warm-up and total steps",
                    {"previous": previous, "value": value},
                ),
            )  # fmt: skip
        )
