"""Overfit: the validation loss pulling away from the training loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float, parse_int
from rules_builtin._select import TensorSelection, scalar_at
from rules_builtin.registry import register

__all__ = ["Overfit"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


@dataclass
class _Means:
    """Running means of one loss: the latest TRAIN phase and the current EVAL phase."""

    train_sum: float = 0.0
    train_n: int = 0
    val_sum: float = 0.0
    val_n: int = 0
    last_mode: ModeKeys | None = None
    streak: int = 0  # consecutive EVAL steps above the threshold

    def add(self, mode: ModeKeys, value: float) -> None:
        if mode == TRAIN:
            if self.last_mode == EVAL:  # a new training phase
                self.train_sum, self.train_n = 0.0, 0
            self.train_sum += value
            self.train_n += 1
        else:
            if self.last_mode != EVAL:  # a new validation phase
                self.val_sum, self.val_n = 0.0, 0
            self.val_sum += value
            self.val_n += 1
        self.last_mode = mode

    def ratio(self) -> float | None:
        """(mean validation - mean training) / |mean training|; None if it is undefined."""
        if not self.train_n or not self.val_n:
            return None
        train = self.train_sum / self.train_n
        if train == 0:
            return None
        return (self.val_sum / self.val_n - train) / abs(train)


@register
class Overfit(Rule):
    """Fires at an EVAL step where, for a loss, ``(val - train) / train > ratio_threshold``
    (default 0.1) at ``patience`` (default 1) consecutive EVAL steps of that loss.

    ``val`` is the mean of the loss over the current validation phase (the run of consecutive
    EVAL steps this step belongs to, up to and including it) and ``train`` its mean over the
    latest training phase (the run of TRAIN steps before it). Comparing phase means, not
    single values, keeps one noisy batch from firing; steps of other modes are ignored, and a
    ratio is undefined (not counted either way) until both phases have a value or when the
    training mean is 0. The streak counts EVAL steps across phases and restarts at an EVAL
    step within the threshold; NaN ratios do not count as above it.

    Tensors: those matching ``tensor_regex``; without it, the ``losses`` collection, or every
    tensor when the trial has no ``losses`` collection. Only scalar (one-element) tensors are
    compared; the same tensor name is expected in both modes, as smdebug's hooks save it.

    Steps before ``start_step`` (a global step) are ignored. The evaluator consumes a
    ``start_step`` RuleParameter itself and never visits earlier steps, which has the same
    effect.
    """

    PARAMETERS = (
        Param("tensor_regex", None, "list",
              "Regular expressions of the loss tensors; default: the losses collection."),
        Param("start_step", "0", "int", "First global step compared."),
        Param("patience", "1", "int",
              "Consecutive EVAL steps above the threshold needed to fire."),
        Param("ratio_threshold", "0.1", "float",
              "Fire when (validation - training) / training exceeds this."),
    )

    def __init__(self, base_trial: Any, tensor_regex: str | None = None,
                 start_step: str | int = "0", patience: str | int = "1",
                 ratio_threshold: str | float = "0.1", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, None, tensor_regex)
        self._losses = TensorSelection(name, ["losses"], None)
        self.start_step = parse_int(name, "start_step", start_step, minimum=0)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.ratio_threshold = parse_float(name, "ratio_threshold", ratio_threshold)
        self._means: dict[str, _Means] = {}
        self._skipped: set[str] = set()  # not scalar

    def invoke_at_step(self, step: int) -> bool:
        if step < self.start_step:
            return False
        mode = self.base_trial.mode(step)
        if mode not in (TRAIN, EVAL):
            return False
        fired = False
        for name in self._names(step):
            value = self._value(name, step)
            if value is None:
                continue
            means = self._means.setdefault(name, _Means())
            means.add(mode, value)
            if mode == EVAL and self._judge(name, means, step):
                fired = True
        return fired

    def _names(self, step: int) -> list[str]:
        trial = self.base_trial
        if self.selection.given:
            names = self.selection.names(trial, step=step)
        elif "losses" in trial.collections():
            names = self._losses.names(trial, step=step)
        else:
            names = trial.tensor_names(step=step)
        return [n for n in names if n not in self._skipped]

    def _value(self, name: str, step: int) -> float | None:
        return scalar_at(self.base_trial, name, step, not_scalar=self._skipped)

    def _judge(self, name: str, means: _Means, step: int) -> bool:
        ratio = means.ratio()
        if ratio is None:
            return False
        means.streak = means.streak + 1 if ratio > self.ratio_threshold else 0
        if means.streak >= self.patience:
            self.logger.info("%s: %s validation/training ratio %g > %g for %d EVAL step(s) "
                             "at step %d", self.rule_name, name, ratio, self.ratio_threshold,
                             means.streak, step)
            return True
        return False
