"""UnchangedTensor: tensors whose value stays the same over several saved steps."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import TRAINING
from evaluator.rules.kit.params import Param, parse_bool, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
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
    ``train-merror`` once the booster fits its training data: nothing left to change), nor
    one of a TensorBoard log whose value is rounded to 1-4 decimals more coarsely than
    ``rtol``/``atol`` resolve (Hugging Face's Trainer logs its loss rounded to 4 decimals:
    three equal logged values of 0.002 say only that it moved less than 0.00005).
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
    * Only the step numbers of the last ``num_steps`` saved steps are kept per tensor; the
      values come from the kit's windows (``WindowedRows`` with ``before``: a window of steps
      read at once, compared with one numpy call per earlier step), else are read again from
      the trial, the most recent first, only as far back as they still hold the value. The rule assumes steps are visited in increasing order (as ``invoke_rule``
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
        # Per mode: for each saved step, how many of its last num_steps saved steps hold its
        # value (``_unchanged_counts`` over windows of steps, or over the steps read alone).
        self._counts: dict[ModeKeys, WindowedRows] = {}
        self._losses = TensorSelection(name, default_collections=("losses",), all_when_empty=False)

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._history.clear()
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in TRAINING or mode_step is None:
            return False
        where = step_words(self.base_trial, step, mode, mode_step)
        fired = False
        # Every tensor is visited, even after a hit, to keep its step history complete.
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            steps = self._saved_steps(name, mode, mode_step)
            if len(steps) < self.num_steps:
                continue
            same = self._unchanged(name, mode, steps, names)
            if same is None or (
                same >= self.num_steps
                and (self._at_floor(name, step, mode) or self._rounded(name, step))
            ):
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

    def _rounded(self, name: str, step: int) -> bool:
        """A scalar loss of a TensorBoard log's default selection whose value is rounded to
        1-4 decimals (as Hugging Face's Trainer logs its loss, to 4) more coarsely than
        ``rtol``/``atol`` resolve: equal logged values then only say it moved less than the
        rounding."""
        trial = self.base_trial
        if getattr(trial, "kind", None) != "tensorboard" or self.selection.given:
            return False  # smdebug saves the value itself (XGBoost's k/n error rates too)
        if name not in self._losses.names(trial, step=step):
            return False
        value = np.asarray(trial.tensor(name).value(step))
        if value.size != 1 or value.dtype.kind != "f":
            return False
        v = float(value.reshape(-1)[0])
        for decimals in range(1, 5):
            if abs(v - round(v, decimals)) <= 1e-7 * max(1.0, abs(v)):  # float32's precision
                return 0.5 * 10.0**-decimals > self.atol + self.rtol * abs(v)
        return False

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

    def _unchanged(
        self, name: str, mode: ModeKeys, steps: deque[int], names: list[str]
    ) -> int | None:
        """How many of ``steps``, counted back from the newest, hold the newest value (1 when
        the one before differs); None if a value is missing."""
        counts = self._counts.get(mode)
        if counts is None:
            counts = self._counts[mode] = WindowedRows(
                self.base_trial,
                self._unchanged_counts,
                mode=mode,
                dtypes=None,
                alone_dtypes=None,
                empty=True,
                before=self.num_steps - 1,
            )
        earlier = list(steps)[:-1]
        same = counts.get(name, steps[-1], names, earlier=earlier, further=_all_same)
        return None if same is None else int(same)

    def _unchanged_counts(self, rows: np.ndarray) -> np.ndarray:
        """Per row (a step's flattened value): 1 + how many of the rows just before it, up
        to ``num_steps - 1`` of them, the nearest first, are ``_close`` to it."""
        return unchanged_counts(rows, self.num_steps - 1, self.rtol, self.atol, self.equal_nan)


def _all_same(same: int, rows: int) -> bool:
    """Whether an earlier value can still add to ``same``: every one read holds the value."""
    return bool(same == rows)


def unchanged_counts(
    rows: np.ndarray, back: int, rtol: float, atol: float, equal_nan: bool
) -> np.ndarray:
    """Per row of ``rows`` (one step's flattened value each): 1 + the number of rows
    i-1, i-2, ... (at most ``back``) that hold row i's value before the first that does not.
    Numbers compare as ``numpy.allclose(row_i, row_j, rtol, atol, equal_nan)`` (integers as
    float64), other values (booleans, text) as ``numpy.array_equal``."""
    n = len(rows)
    same = np.ones(n, np.int64)
    alive = np.ones(n, bool)
    numbers = rows.dtype.kind in "iufc"
    if rows.dtype.kind in "iu":
        rows = rows.astype(np.float64)
    for k in range(1, min(back, n - 1) + 1):
        close = np.zeros(n, bool)
        close[k:] = _rows_close(rows[k:], rows[:-k], numbers, rtol, atol, equal_nan)
        alive &= close
        if not alive.any():
            break
        same += alive
    return same


def _rows_close(
    x: np.ndarray, y: np.ndarray, numbers: bool, rtol: float, atol: float, equal_nan: bool
) -> np.ndarray:
    """Per row: ``numpy.allclose(x[i], y[i], ...)`` for numbers, else ``array_equal``."""
    if not numbers:
        equal = np.asarray(x == y).reshape(len(x), -1)
        return np.asarray(equal.all(axis=1))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(x - y) <= atol + rtol * np.abs(y)
        finite = np.isfinite(y)
        if not finite.all():  # numpy.isclose's rule for inf and NaN
            close = (close & finite) | (x == y)
            if equal_nan:
                close |= np.isnan(x) & np.isnan(y)
    result: np.ndarray = close.all(axis=1)
    return result
