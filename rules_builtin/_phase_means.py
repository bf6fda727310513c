"""The phase means of one loss that Overfit compares: the latest training phase (a run of
TRAIN steps) and the validation pass after it (a run of EVAL steps), with what Overfit keeps
between passes (the streak above the threshold, the best validation mean, the judged means
for their noise: ``rules_builtin._validation_rise``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evaluator.modes import ModeKeys
from rules_builtin._validation_rise import ValidationRise

__all__ = ["PhaseMeans", "gap_ratio", "lowest_of"]

TRAIN = ModeKeys.TRAIN


@dataclass
class PhaseMeans:
    """Means of one loss: the latest TRAIN phase and the current (or last) EVAL phase."""

    train_sum: float = 0.0
    train_n: int = 0
    train_first: int | None = None  # TRAIN mode steps of the training phase
    train_last: int | None = None
    val_sum: float = 0.0
    val_n: int = 0
    val_first: int | None = None  # EVAL mode steps of the validation phase
    val_last: int | None = None
    val_last_step: int | None = None  # its last global step
    val_open: bool = False  # a validation phase is under way (not judged yet)
    new_train: bool = True  # the next TRAIN value starts a new training phase
    streak: int = 0  # consecutive judged validation passes above the threshold
    val_best: float | None = None  # the lowest validation mean judged so far
    epoch_logs: bool = False  # a Keras epoch-end log of this loss has been seen
    rise: ValidationRise = field(default_factory=ValidationRise)  # the judged means
    train_at_best: float = math.nan  # the training mean judged with the best validation mean

    def add(self, mode: ModeKeys, value: float, mode_step: int, step: int) -> None:
        if mode == TRAIN:
            if self.new_train:
                self.train_sum, self.train_n, self.train_first = 0.0, 0, mode_step
                self.new_train = False
            self.train_sum += value
            self.train_n += 1
            self.train_last = mode_step
        else:
            if not self.val_open:  # a new validation phase
                self.val_sum, self.val_n, self.val_first = 0.0, 0, mode_step
                self.val_open, self.new_train = True, True
            self.val_sum += value
            self.val_n += 1
            self.val_last, self.val_last_step = mode_step, step

    def close(self) -> tuple[float, float] | None:
        """End the validation phase: (mean training, mean validation) when it and a training
        phase before it have values, else None."""
        if not self.val_open:
            return None
        self.val_open = False
        if not self.train_n or not self.val_n:
            return None
        return self.train_sum / self.train_n, self.val_sum / self.val_n


def lowest_of(best: float | None, value: float) -> float | None:
    """The lower of ``best`` and ``value``; a NaN value leaves ``best`` as it is."""
    if math.isnan(value):
        return best
    return value if best is None else min(best, value)


def gap_ratio(train: float, val: float) -> float | None:
    """(val - train) / |train|; None when the training value is 0."""
    if train == 0:
        return None
    return (val - train) / abs(train)
