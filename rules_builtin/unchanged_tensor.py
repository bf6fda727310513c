"""UnchangedTensor: tensors whose value stays the same over several saved steps."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_bool, parse_float, parse_int
from rules_builtin._select import TensorSelection, listed
from rules_builtin.registry import register


@register
class UnchangedTensor(Rule):
    """Fires at a step when a selected tensor saved at that step has the same value at its
    last ``num_steps`` saved steps (this one included): ``numpy.allclose(value(s), value(p),
    rtol, atol, equal_nan)`` for every earlier step p of them. With fewer than ``num_steps``
    saved steps it does not fire. The steps need not be consecutive: a tensor saved every
    10 steps is compared at s, s-10, s-20.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); all
    tensors when neither is given. ``num_steps`` is at least 2.

    Choices:

    * Steps are counted within the mode of the step (TRAIN, EVAL, PREDICT, or GLOBAL for a
      trial without modes): a TRAIN step is compared with earlier TRAIN steps only, so an
      evaluation pass in between neither breaks nor makes a run of equal values.
    * Values of different shapes differ; tensors that are not numbers compare with
      ``numpy.array_equal``; a tensor without a raw value at one of the steps does not fire.
    * Only the step numbers of the last ``num_steps`` saved steps are kept per tensor; values
      are read again from the trial, the most recent first, so a changing tensor costs one
      extra read. The rule assumes steps are visited in increasing order (as ``invoke_rule``
      does); a step at or before the previous one starts the bookkeeping afresh.
    """

    PARAMETERS = (
        Param("collection_names", None, "list",
              "Collections whose tensors are checked (comma-separated)."),
        Param("tensor_regex", None, "list",
              "Regular expressions selecting tensors by name (comma-separated)."),
        Param("num_steps", "3", "int",
              "How many saved steps (this one included) the value must stay the same."),
        Param("rtol", "1e-05", "float", "Relative tolerance of numpy.allclose."),
        Param("atol", "1e-08", "float", "Absolute tolerance of numpy.allclose."),
        Param("equal_nan", "False", "bool", "Whether NaN equals NaN."),
    )

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, num_steps: str | int = "3",
                 rtol: str | float = "1e-05", atol: str | float = "1e-08",
                 equal_nan: str | bool = "False", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, collection_names, tensor_regex)
        self.num_steps = parse_int(name, "num_steps", num_steps, minimum=2)
        self.rtol = parse_float(name, "rtol", rtol, minimum=0)
        self.atol = parse_float(name, "atol", atol, minimum=0)
        self.equal_nan = parse_bool(name, "equal_nan", equal_nan)
        self._history: dict[tuple[str, ModeKeys], deque[int]] = {}
        self._last_step: int | None = None

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._history.clear()
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode is None or mode_step is None:
            return False
        unchanged = []
        # Every tensor is visited, even after a hit, to keep its step history complete.
        for name in self.selection.names(self.base_trial, step=step):
            steps = self._saved_steps(name, mode, mode_step)
            if len(steps) == self.num_steps and self._unchanged(name, mode, steps):
                unchanged.append(name)
        if unchanged:
            self.logger.info("%s: unchanged over %d saved steps at step %d: %s", self.rule_name,
                             self.num_steps, step, listed(unchanged))
        return bool(unchanged)

    def _saved_steps(self, name: str, mode: ModeKeys, mode_step: int) -> deque[int]:
        """The last ``num_steps`` saved mode steps of ``name``, ending with ``mode_step``."""
        key = (name, mode)
        history = self._history.get(key)
        if history is None:
            earlier = self.base_trial.tensor(name).prev_steps(mode_step, n=self.num_steps,
                                                              mode=mode)
            history = self._history[key] = deque(earlier, maxlen=self.num_steps)
        if not history or history[-1] != mode_step:
            history.append(mode_step)
        return history

    def _unchanged(self, name: str, mode: ModeKeys, steps: deque[int]) -> bool:
        tensor = self.base_trial.tensor(name)
        try:
            current = np.asarray(tensor.value(steps[-1], mode=mode))
            for earlier in reversed(list(steps)[:-1]):
                if not self._close(current, np.asarray(tensor.value(earlier, mode=mode))):
                    return False
        except TensorUnavailableForStep:
            return False
        return True

    def _close(self, a: np.ndarray, b: np.ndarray) -> bool:
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "iufc" and b.dtype.kind in "iufc":
            return _allclose(a, b, self.rtol, self.atol, self.equal_nan)
        return bool(np.array_equal(a, b))


def _allclose(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> bool:
    """``numpy.allclose(a, b, rtol, atol, equal_nan)`` for same-shape arrays, faster for the
    usual answers: a changed tensor usually differs at its first element already."""
    if a.size == 0:
        return True
    x = a if a.dtype.kind in "fc" else a.astype(np.float64)
    y = b if b.dtype.kind in "fc" else b.astype(np.float64)
    first_x, first_y = x.flat[0], y.flat[0]
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isfinite(first_x) and np.isfinite(first_y) and \
                abs(first_x - first_y) > atol + rtol * abs(first_y):
            return False
        if np.isfinite(y).all():  # then the bound is finite and NaN or inf in x fails it
            return bool((np.abs(x - y) <= atol + rtol * np.abs(y)).all())
        return bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))
