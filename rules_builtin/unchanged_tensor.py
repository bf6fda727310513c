"""UnchangedTensor: tensors whose value stays the same over several saved steps."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import TRAINING
from evaluator.rules.kit.params import Param, parse_bool, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import FLOATS, WindowedRows
from evaluator.rules.rule import Rule
from rules_builtin.registry import register

# The tensors that must change while a model trains (the default selection).
DEFAULT_COLLECTIONS = ("weights", "biases", "gradients", "losses")


@register
class UnchangedTensor(Rule):
    """Fires at a step when a selected tensor saved at that step has the same value at its
    last ``num_steps`` saved steps (this one included): ``numpy.allclose(value(s), value(p),
    rtol, atol, equal_nan)`` for every earlier step p of them. With fewer than ``num_steps``
    saved steps it does not fire. The steps need not be consecutive: a tensor saved every
    10 steps is compared at s, s-10, s-20.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated). With
    neither, the tensors that must change while a model trains: those of the ``weights``,
    ``biases``, ``gradients`` and ``losses`` collections that exist in the trial (a collection
    listing tensor names, as Keras writes them, or an ``include_regex``, as PyTorch does; an
    XGBoost trial's ``losses`` holds its ``train-*``/``validation-*`` loss metrics). Tensors
    constant by nature (XGBoost ``hyperparameters/*``, Keras ``batch``, an ``accuracy`` that
    has reached 1.0) are then not checked; name them to check them. Nor is a loss of that
    selection that is exactly 0 (an error rate or loss at its floor, as XGBoost's
    ``train-merror`` once the booster fits its training data: nothing left to change).
    ``num_steps`` is at least 2.

    Choices:

    * Only training steps are checked: TRAIN steps, or every step of a trial without modes
      (GLOBAL steps count as training). ``num_steps`` counts saved steps of that mode (AWS:
      "the last num_steps that are available"): a TRAIN step is compared with earlier saved
      TRAIN steps only, so an evaluation pass in between neither breaks nor makes a run of
      equal values. EVAL and PREDICT steps are not checked at all: nothing trains there, so
      an unchanged value is expected and says nothing about training (Keras saves weights at
      EVAL steps with the previous TRAIN step's values, validation inputs and labels repeat
      every pass, Keras' epoch-end EVAL step holds training logs).
    * Evidence: at a training step where the tensor has ``num_steps`` saved steps, the rule
      records how many of them, counted back from this one, hold the same value ("saved
      TRAIN steps with an unchanged value") against ``num_steps`` (fires when ``>=``). A
      tensor with fewer saved steps, or without a raw value at one of them, is not recorded.
    * Values of different shapes differ; tensors that are not numbers compare with
      ``numpy.array_equal``; a tensor without a raw value at one of the steps does not fire.
    * Only the step numbers of the last ``num_steps`` saved steps are kept per tensor; values
      are read again from the trial, the most recent first, so a changing tensor costs one
      extra read. The rule assumes steps are visited in increasing order (as ``invoke_rule``
      does); a step at or before the previous one starts the bookkeeping afresh.
    """

    PARAMETERS = (
        Param(
            "collection_names",
            None,
            "list",
            "Collections whose tensors are checked (comma-separated); with neither this nor "
            "tensor_regex: the weights, biases, gradients and losses collections.",
        ),
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions selecting tensors by name (comma-separated).",
        ),
        Param(
            "num_steps",
            "3",
            "int",
            "How many saved steps (this one included) the value must stay the same.",
        ),
        Param("rtol", "1e-05", "float", "Relative tolerance of numpy.allclose."),
        Param("atol", "1e-08", "float", "Absolute tolerance of numpy.allclose."),
        Param("equal_nan", "False", "bool", "Whether NaN equals NaN."),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        num_steps: str | int = "3",
        rtol: str | float = "1e-05",
        atol: str | float = "1e-08",
        equal_nan: str | bool = "False",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(
            name, collection_names, tensor_regex, default_collections=DEFAULT_COLLECTIONS
        )
        self.num_steps = parse_int(name, "num_steps", num_steps, minimum=2)
        self.rtol = parse_float(name, "rtol", rtol, minimum=0)
        self.atol = parse_float(name, "atol", atol, minimum=0)
        self.equal_nan = parse_bool(name, "equal_nan", equal_nan)
        self._history: dict[tuple[str, ModeKeys], deque[int]] = {}
        self._last_step: int | None = None
        # Per mode: for a window of saved steps at once (where the trial has a batch read),
        # whether each value is close to the values 1 .. num_steps - 1 saved steps before.
        self._closeness: dict[ModeKeys, WindowedRows] = {}
        self._losses = TensorSelection(name, default_collections=("losses",), all_when_empty=False)

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._history.clear()
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in TRAINING or mode_step is None:
            return False
        where = (
            f"{mode.name} step {mode_step} (global step {step})"
            if mode != ModeKeys.GLOBAL
            else f"step {step}"
        )
        fired = False
        # Every tensor is visited, even after a hit, to keep its step history complete.
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            steps = self._saved_steps(name, mode, mode_step)
            if len(steps) < self.num_steps:
                continue
            same = self._unchanged_batched(name, mode, steps, names)
            if same is None:
                same = self._unchanged(name, mode, steps)
            if same is None or (same >= self.num_steps and self._at_floor(name, step, mode)):
                continue
            fired = (
                self.evidence.compare(
                    step,
                    name,
                    quantity=f"saved {mode.name} steps with an unchanged value",
                    value=same,
                    parameter="num_steps",
                    threshold=self.num_steps,
                    fires_when=">=",
                    mode=mode,
                    mode_step=mode_step,
                    sentence=lambda: (
                        f"{self.rule_name}: {name} unchanged over its last {same} saved "
                        f"{mode.name} steps ({', '.join(map(str, steps))}) at {where}"
                    ),
                )
                or fired
            )
        return fired

    def selection_hints(self) -> list[SelectionHint]:
        return [
            dataclasses.replace(
                self.selection.hint(),
                advice="UnchangedTensor checks TRAIN steps (or the steps of a trial without "
                "modes) only; save the tensors at TRAIN steps",
            )
        ]

    def _at_floor(self, name: str, step: int, mode: ModeKeys) -> bool:
        """A loss of the default selection whose value at ``step`` is exactly 0."""
        if self.selection.given or name not in self._losses.names(self.base_trial, step=step):
            return False
        value = np.asarray(self.base_trial.tensor(name).value(step))
        return value.size == 1 and value.dtype.kind in "iuf" and float(value.reshape(-1)[0]) == 0

    def _saved_steps(self, name: str, mode: ModeKeys, mode_step: int) -> deque[int]:
        """The last ``num_steps`` saved mode steps of ``name``, ending with ``mode_step``."""
        key = (name, mode)
        history = self._history.get(key)
        if history is None:
            earlier = self.base_trial.tensor(name).prev_steps(
                mode_step, n=self.num_steps, mode=mode
            )
            history = self._history[key] = deque(earlier, maxlen=self.num_steps)
        if not history or history[-1] != mode_step:
            history.append(mode_step)
        return history

    def _unchanged_batched(
        self, name: str, mode: ModeKeys, steps: deque[int], names: list[str]
    ) -> int | None:
        """``_unchanged`` from the window's closeness flags when they answer it (the earlier
        steps are the rows just before in the window, their values finite), with the reads
        the per-step path would make counted; None otherwise."""
        rows = self._closeness.get(mode)
        if rows is None:
            rows = self._closeness[mode] = WindowedRows(
                self.base_trial, self._close_rows, mode=mode, dtypes=FLOATS
            )
        flags = rows.get(name, steps[-1], names)  # counts the read of the newest value
        if flags is None:
            return None
        earlier = list(steps)[:-1]
        if rows.steps_before(name, steps[-1], len(earlier)) != earlier:
            return None
        same = 1
        for back in range(1, len(earlier) + 1):  # the step before first, as _unchanged
            close = flags[back - 1]
            if close is None:
                return None
            rows.note(name, earlier[-back])  # the earlier value the per-step path reads
            if not close:
                break
            same += 1
        return same

    def _close_rows(self, flat: np.ndarray) -> list[list[bool | None]]:
        """Per row i, for k = 1 .. num_steps - 1: whether row i is ``_close`` to row i - k
        (None where there is no row i - k or it holds NaN or inf: ``_close`` decides)."""
        n = len(flat)
        found: list[list[bool | None]] = [[None] * (self.num_steps - 1) for _ in range(n)]
        with np.errstate(invalid="ignore", over="ignore"):
            for k in range(1, min(self.num_steps - 1, n - 1) + 1):
                x, y = flat[k:], flat[:-k]
                finite = np.isfinite(y).all(axis=1)
                close = (np.abs(x - y) <= self.atol + self.rtol * np.abs(y)).all(axis=1)
                for i in range(k, n):
                    if finite[i - k]:
                        found[i][k - 1] = bool(close[i - k])
        return found

    def _unchanged(self, name: str, mode: ModeKeys, steps: deque[int]) -> int | None:
        """How many of ``steps``, counted back from the newest, hold the newest value (1 when
        the one before differs); None if a value is missing."""
        tensor = self.base_trial.tensor(name)
        same = 1
        try:
            current = np.asarray(tensor.value(steps[-1], mode=mode))
            for earlier in reversed(list(steps)[:-1]):
                if not self._close(current, np.asarray(tensor.value(earlier, mode=mode))):
                    break
                same += 1
        except TensorUnavailableForStep:
            return None
        return same

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
        if (
            np.isfinite(first_x)
            and np.isfinite(first_y)
            and abs(first_x - first_y) > atol + rtol * abs(first_y)
        ):
            return False
        if np.isfinite(y).all():  # then the bound is finite and NaN or inf in x fails it
            return bool((np.abs(x - y) <= atol + rtol * np.abs(y)).all())
        return bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))
