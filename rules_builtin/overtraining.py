"""Overtraining: training or validation loss that has stopped improving."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


from evaluator.errors import ConfigurationError
from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float, parse_int
from rules_builtin._select import TensorSelection, scalar_at
from rules_builtin.registry import register

__all__ = ["Overtraining"]

# Which loss a step's value is: GLOBAL (a hook that never set modes) counts as training.
_ROLE = {ModeKeys.TRAIN: "train", ModeKeys.GLOBAL: "train", ModeKeys.EVAL: "validation"}


@dataclass
class _Best:
    """The best value of one loss in one role, and how many values since it."""

    value: float | None = None
    since: int = 0

    def observe(self, value: float, delta: float) -> None:
        if self.value is None or value < self.value - delta * abs(self.value):
            self.value, self.since = value, 0
        else:
            self.since += 1


@dataclass
class _Loss:
    roles: dict[str, _Best] = field(
        default_factory=lambda: {"train": _Best(), "validation": _Best()})


@register
class Overtraining(Rule):
    """Fires at a step where a loss of the ``losses`` collection has gone ``patience_train``
    (default 5) saved TRAIN values, or ``patience_validation`` (default 10) saved EVAL values,
    without a new best.

    A value is a new best when it is lower than the best so far by more than ``delta`` times
    the best's magnitude (default 0.01, i.e. 1 %); the first value is the first best. The
    sources do not say whether ``delta`` is absolute or relative: we take it as relative so
    that the default means the same for a cross-entropy near 0.1 and a squared error near
    1e4. Small improvements still add up: a value more than 1 % below the old best is a new
    best however many steps it took to get there. A loss stuck at 0 never improves.

    "Steps" in the patience parameters are saved values of that mode (a loss saved every 500
    steps with ``patience_train=5`` waits 2500 training steps), not step numbers, so the rule
    behaves the same whatever the save interval. It keeps firing at each further value
    without improvement. Steps saved without a mode (GLOBAL) count as training; PREDICT steps
    are ignored. Only scalar (one-element) tensors are tracked; a NaN value is never an
    improvement.
    """

    PARAMETERS = (
        Param("patience_train", "5", "int",
              "Saved TRAIN values without a new best before firing."),
        Param("patience_validation", "10", "int",
              "Saved EVAL values without a new best before firing."),
        Param("delta", "0.01", "float",
              "Fraction of the best value a new value must be lower by to be a new best."),
    )

    def __init__(self, base_trial: Any, patience_train: str | int = "5",
                 patience_validation: str | int = "10", delta: str | float = "0.01",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.patience = {
            "train": parse_int(name, "patience_train", patience_train, minimum=1),
            "validation": parse_int(name, "patience_validation", patience_validation, minimum=1),
        }
        self.delta = parse_float(name, "delta", delta)
        if self.delta < 0:
            raise ConfigurationError(f"{name} parameter delta must be >= 0, got {delta!r}")
        self.selection = TensorSelection(name, ["losses"], None)
        self._losses: dict[str, _Loss] = {}
        self._skipped: set[str] = set()  # not scalar

    def invoke_at_step(self, step: int) -> bool:
        mode = self.base_trial.mode(step)
        role = _ROLE.get(mode) if mode is not None else None
        if role is None:
            return False
        fired = False
        for name in self.selection.names(self.base_trial, step=step):
            if name in self._skipped:
                continue
            value = self._value(name, step)
            if value is None:
                continue
            best = self._losses.setdefault(name, _Loss()).roles[role]
            best.observe(value, self.delta)
            if best.since >= self.patience[role]:
                self.logger.info("%s: %s %s loss has not improved on %g for %d saved values "
                                 "at step %d", self.rule_name, name, role, best.value,
                                 best.since, step)
                fired = True
        return fired

    def _value(self, name: str, step: int) -> float | None:
        return scalar_at(self.base_trial, name, step, not_scalar=self._skipped)
