"""WeightUpdateRatio: weight updates too large or too small relative to the weights."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import TRAINING
from evaluator.rules.kit.params import Param, parse_float, parse_optional_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register


@register
class WeightUpdateRatio(Rule):
    """Fires at a training step s when, for any tensor of the ``weights`` collection saved at
    s and at an earlier step p, ``ratio = ||w(s) - w(p)|| / (||w(p)|| + epsilon)`` is above
    ``large_threshold`` or below ``small_threshold``. The norms are L2 (Frobenius) norms of
    the flattened tensors, computed in float64.

    p is the tensor's previous saved step; with ``num_steps``, it is the oldest saved step p
    with s - num_steps <= p < s. Without such a step (the first save, or no save within the
    window) the tensor is not compared. Weights must therefore be saved at nearby steps
    (save_interval 1 in the 2019 documentation).

    Choices:

    * Only training steps are evaluated and compared: TRAIN steps, or every step of a trial
      without modes (GLOBAL steps count as training). ``num_steps`` is a distance in TRAIN
      mode steps (TRAIN step 0, 1, 2 … as the hook numbers them), never global steps, so
      EVAL steps interleaved in the global counter never stretch or shrink the window.
      EVAL/PREDICT steps are skipped and never serve as p: weights do not change while
      evaluating (Keras saves them at EVAL steps with unchanged values), so a ratio of 0
      there would fire falsely.
    * Evidence: both conditions are recorded for every compared weight, "update ratio"
      against ``large_threshold`` (fires when ``>``) and against ``small_threshold`` (fires
      when ``<``); a weight without an earlier saved TRAIN step in the window is not a
      comparison and is not recorded.
    * A trial without a ``weights`` collection has nothing to check: a warning is logged
      once and the rule never fires.
    * A weight without a raw value at s or p, or whose shape changed, is not compared; a NaN
      ratio never fires (that is ExplodingTensor's job).
    * The rule keeps, per weight, the last value and norm it read, and the norms of the saved
      steps still inside the ``num_steps`` window, never a longer history. It assumes steps
      are visited in increasing order (as ``invoke_rule`` does); a step at or before the
      previous one starts the bookkeeping afresh.
    """

    PARAMETERS = (
        Param(
            "num_steps",
            None,
            "int",
            "Compare with the oldest saved step at most this many training steps back "
            "(default: the previous saved step).",
        ),
        Param("large_threshold", "10.0", "float", "Fire when the ratio is above this."),
        Param("small_threshold", "0.00000001", "float", "Fire when the ratio is below this."),
        Param(
            "epsilon",
            "0.000000001",
            "float",
            "Added to the norm of the earlier weights, so zero weights do not divide by 0.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        num_steps: str | int | None = None,
        large_threshold: str | float = "10.0",
        small_threshold: str | float = "0.00000001",
        epsilon: str | float = "0.000000001",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.num_steps = parse_optional_int(name, "num_steps", num_steps, minimum=1)
        self.large_threshold = parse_float(name, "large_threshold", large_threshold)
        self.small_threshold = parse_float(name, "small_threshold", small_threshold)
        self.epsilon = parse_float(name, "epsilon", epsilon)
        self.selection = TensorSelection(
            name, default_collections=["weights"], all_when_empty=False
        )
        # Per (weight, mode): earlier saved steps that may still be p, with their norm (None
        # until computed); and the last value read, reused when it is p.
        self._earlier: dict[tuple[str, ModeKeys], deque[tuple[int, float | None]]] = {}
        self._latest: dict[tuple[str, ModeKeys], tuple[int, np.ndarray]] = {}
        self._last_step: int | None = None
        # Per mode: the weights of a window of saved steps at once, as float64 (where the
        # trial has a batch read), instead of a value() call per weight and step.
        self._windows: dict[ModeKeys, WindowedRows] = {}

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._earlier.clear()
            self._latest.clear()
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in TRAINING or mode_step is None:
            return False
        fired = False
        where = step_words(self.base_trial, step, mode, mode_step)
        # The weights of a step are mostly compared with the same earlier step: its words
        # are made once.
        said: tuple[int, str, str] | None = None
        # Every weight is visited, even after a hit, to keep the bookkeeping complete.
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            compared = self._ratio(name, mode, mode_step, names)
            if compared is None:
                continue
            ratio, earlier = compared
            if said is None or said[0] != earlier:
                since = (
                    f"since {mode.name} step {earlier}"
                    if mode != ModeKeys.GLOBAL
                    else f"since step {earlier}"
                )
                said = (
                    earlier,
                    since,
                    f"update ratio ||w - w_prev|| / (||w_prev|| + epsilon) {since}",
                )
            _, since, quantity = said
            large = self.evidence.compare(
                step,
                name,
                quantity=quantity,
                value=ratio,
                parameter="large_threshold",
                threshold=self.large_threshold,
                fires_when=">",
                mode=mode,
                mode_step=mode_step,
                sentence=lambda: (
                    f"{self.rule_name}: update ratio of {name} {since} is {ratio:.3g} at "
                    f"{where}, above large_threshold={self.large_threshold:g}"
                ),
            )
            small = self.evidence.compare(
                step,
                name,
                quantity=quantity,
                value=ratio,
                parameter="small_threshold",
                threshold=self.small_threshold,
                fires_when="<",
                mode=mode,
                mode_step=mode_step,
                sentence=lambda: (
                    f"{self.rule_name}: update ratio of {name} {since} is {ratio:.3g} at "
                    f"{where}, below small_threshold={self.small_threshold:g} (the "
                    "weight did not change)"
                ),
            )
            fired = large or small or fired
        return fired

    def selection_hints(self) -> list[SelectionHint]:
        return [
            dataclasses.replace(
                self.selection.hint(),
                parameter=None,
                advice="save the hook's weights collection at nearby TRAIN steps (WeightUpdateRatio "
                "has no selection parameter)",
            )
        ]

    def _ratio(
        self, name: str, mode: ModeKeys, mode_step: int, names: list[str]
    ) -> tuple[float, int] | None:
        """The update ratio of ``name`` at ``mode_step`` and the mode step p it is compared
        with; None when there is nothing to compare."""
        key = (name, mode)
        earlier = self._earlier.get(key)
        if earlier is None:
            tensor = self.base_trial.tensor(name)
            earlier = self._earlier[key] = self._seed(tensor, mode, mode_step)
        window = self._windows.get(mode)
        if window is None:
            window = self._windows[mode] = WindowedRows(
                self.base_trial,
                _window_rows,
                mode=mode,
                flatten=False,
                alone_dtypes=_NUMBERS,
                empty=True,
            )
        row: _Row | None = window.get(name, mode_step, names)
        value, norm, prior, update = (None, None, None, None) if row is None else row
        # (The common cases inline: this runs for every weight and step.)
        if self.num_steps is None:
            previous = earlier[0] if earlier else None
        else:
            previous = self._previous(earlier, mode_step)
        if value is None:
            earlier.append((mode_step, None))
            self._latest.pop(key, None)
            return None
        ratio: tuple[float, int] | None = None
        if previous is not None:
            step_p, norm_p = previous
            before = self._value_at(key, step_p)
            if before is not None and before.shape == value.shape:
                if norm_p is None:
                    norm_p = _norm(before)
                if before is not prior or update is None:
                    update = _norm_of_update(value, before)
                ratio = (update / (norm_p + self.epsilon), step_p)
        earlier.append((mode_step, _norm(value) if norm is None else norm))
        self._latest[key] = (mode_step, value)
        return ratio

    def _seed(self, tensor: Any, mode: ModeKeys, mode_step: int) -> deque[tuple[int, float | None]]:
        """The saved steps before ``mode_step`` that may be p, read once per weight."""
        steps = [s for s in tensor.prev_steps(mode_step, mode=mode) if s < mode_step]
        if self.num_steps is None:
            return deque([(s, None) for s in steps[-1:]], maxlen=1)
        return deque((s, None) for s in steps if s >= mode_step - self.num_steps)

    def _previous(
        self, earlier: deque[tuple[int, float | None]], mode_step: int
    ) -> tuple[int, float | None] | None:
        if self.num_steps is not None:
            while earlier and earlier[0][0] < mode_step - self.num_steps:
                earlier.popleft()
        if not earlier:
            return None
        return earlier[0]

    def _value_at(self, key: tuple[str, ModeKeys], mode_step: int) -> np.ndarray | None:
        latest = self._latest.get(key)
        if latest is not None and latest[0] == mode_step:
            return latest[1]
        return _as_float64(_value(self.base_trial.tensor(key[0]), key[1], mode_step))


def _value(tensor: Any, mode: ModeKeys, mode_step: int) -> Any:
    try:
        return tensor.value(mode_step, mode=mode)
    except TensorUnavailableForStep:
        return None


def _as_float64(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    array = np.asarray(value)
    return array.astype(np.float64, copy=False) if array.dtype.kind in "iuf" else None


def _norm(array: np.ndarray) -> float:
    """``float(np.linalg.norm(array.ravel()))`` for float64, bit for bit: numpy computes it as
    ``sqrt(x.dot(x))`` of the raveled array, and math.sqrt rounds as numpy's sqrt does
    (tests/unit/rules_builtin/test_weight_update_ratio.py), without its per-call checks."""
    flat = array.ravel()
    with np.errstate(over="ignore", invalid="ignore"):  # inf weights: ExplodingTensor's job
        return math.sqrt(flat.dot(flat))


def _norm_of_update(value: np.ndarray, before: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        update = (value - before).ravel()
        return math.sqrt(update.dot(update))


_UPDATE_BYTES = 2 * 1024 * 1024

# The dtypes ``_as_float64`` takes: integers and floats.
_NUMBERS = [np.dtype(t) for t in "bBhHiIlLqQefdg"]

# A window's row of one weight: its value as ``_as_float64`` gives it, the norm of that value,
# the row before it (None for a window's first row) and the norm of the update since it.
_Row = tuple[np.ndarray, float, np.ndarray | None, float | None]


def _window_rows(stacked: np.ndarray) -> list[_Row]:
    """The rows of a window of steps of one weight (or a step alone), their norms and the
    norms of the updates between neighbours, as ``_norm`` and ``_norm_of_update`` give them
    (numpy subtracts the stacked rows element by element, as it does the arrays alone)."""
    values = stacked.astype(np.float64)
    flat = values.reshape(len(values), -1)
    # The updates are subtracted a few MiB of rows at a time: no second copy of the window.
    chunk = max(1, _UPDATE_BYTES // max(1, flat[0].nbytes))
    with np.errstate(over="ignore", invalid="ignore"):  # inf weights: ExplodingTensor's job
        norms = [math.sqrt(row.dot(row)) for row in flat]
        updates: list[float | None] = [None]
        for start in range(1, len(flat), chunk):
            end = min(start + chunk, len(flat))
            block = flat[start:end] - flat[start - 1 : end - 1]
            updates.extend(math.sqrt(row.dot(row)) for row in block)
    rows = list(values)
    return list(zip(rows, norms, [None, *rows[:-1]], updates, strict=True))
