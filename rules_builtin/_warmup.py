"""Whether the learning rate is still warming up: a loss is not expected to fall yet.

Most fine-tuning runs raise the learning rate from about 0 over their first hundreds of steps
(Hugging Face's ``warmup_steps``/``warmup_ratio``, Lightning's and timm's schedulers). While it
rises, a loss stuck at its starting value (ln 2 for a binary classifier, a language model's
first plateau) says nothing about the run. When the trial logs a learning rate
(``learning_rate``, ``lr``, ``lr-Adam`` ...: ``LEARNING_RATE``), LossNotDecreasing does not
compare windows that end while the latest learning rate logged is still above every earlier
one (a schedule that rises), and Overtraining does not count its training values then. A constant or decaying learning rate,
or none logged, changes nothing.
"""

from __future__ import annotations

import bisect
import math
import re
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import as_training
from evaluator.rules.kit.selection import scalar

__all__ = ["LEARNING_RATE", "WarmUp"]

LEARNING_RATE = re.compile(r"(?i)(^|[/_.-])(learning_rate|lr)([/_.-][a-z0-9_.-]*)?$")


class WarmUp:
    """The learning rate a trial logs (the first tensor whose name matches ``LEARNING_RATE``),
    read once per value."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._name: str | None | bool = False  # False: not looked up yet
        self._steps: list[int] = []
        self._values: list[float] = []
        self._highest: list[float] = []  # the highest value up to each one (running maximum)
        self._read_to = -1

    def name(self) -> str | None:
        if self._name is False:
            names = sorted(n for n in self.trial.tensor_names() if LEARNING_RATE.search(n))
            self._name = names[0] if names else None
        return self._name if isinstance(self._name, str) else None

    def rising_at(self, *steps: int) -> bool:
        """Whether, at any of the global ``steps``, the learning rate's latest value at or
        before it is above every earlier one (and there are at least two): a warm-up under
        way then."""
        return any(self._rising(step) for step in steps)

    def _rising(self, step: int) -> bool:
        name = self.name()
        if name is None:
            return False
        self._read(name, max(step, self._read_to))
        upto = bisect.bisect_right(self._steps, step)
        if upto < 2:
            return False
        return self._values[upto - 1] > self._highest[upto - 2]

    def _read(self, name: str, step: int) -> None:
        """Read the values saved after the last read, up to global ``step``, once each."""
        if step <= self._read_to:
            return
        tensor = self.trial.tensor(name)
        saved = tensor.steps()
        for s in saved[bisect.bisect_right(saved, self._read_to) :]:
            if s > step:
                break
            if as_training(self.trial.mode(s)) != ModeKeys.TRAIN:
                continue
            value = scalar(tensor.value(s))
            if value is not None and math.isfinite(value):
                self._steps.append(s)
                self._values.append(value)
                self._highest.append(max(value, self._highest[-1]) if self._highest else value)
        self._read_to = step
