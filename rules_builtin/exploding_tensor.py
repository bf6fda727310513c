"""ExplodingTensor: tensors holding NaN (or, unless ``only_nan``, infinite) values."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.diagnosis import DIVERGING, Diagnosis
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_bool
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import logged_step, step_words
from rules_builtin.registry import register

_XGBOOST_TREES = "trees/"  # smdebug.xgboost's tree dump: NaN marks a leaf, not a fault
# The dtypes checked (those that can hold NaN or infinity); windows read float32 and float64.
_CHECKED = tuple(
    np.dtype(t)
    for t in (np.float16, np.float32, np.float64, np.longdouble)
    + (np.complex64, np.complex128, np.clongdouble)
)
ALLOWED = "non-finite elements allowed"  # the fixed limit (0) the count is compared with


@register
class ExplodingTensor(Rule):
    """Fires at a step when any selected tensor saved at that step holds a NaN, or, unless
    ``only_nan``, a +inf or -inf.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); all
    tensors when neither is given, except XGBoost's tree dump (``trees/*``), whose ``Split``,
    ``Yes``, ``No`` and ``Missing`` columns hold NaN for every leaf by design (a named
    selection includes them). Only float and complex tensors are checked (other dtypes
    cannot hold non-finite values). The value read is the one ``Tensor.value(step)`` returns
    (the first worker that saved the step).

    Choice: a tensor saved as reductions only (no raw value) is judged by its saved
    reductions: a NaN reduction counts as NaN; with ``only_nan`` false, any non-finite
    reduction counts. A mean or sum can overflow to inf for huge finite values; that is
    reported too, as it is an exploding tensor all the same. A tensor saved as a shape only is
    skipped.

    Evidence: each tensor checked records the count of its ``NaN or infinite elements``
    (``NaN elements`` with ``only_nan``; for a reductions-only tensor, of its saved
    reductions) compared with the fixed limit ``non-finite elements allowed`` = 0: it fires
    when the count is > 0. That limit is not a parameter; ``only_nan`` chooses what is
    counted.
    """

    PARAMETERS = (
        Param(
            "collection_names",
            None,
            "list",
            "Collections whose tensors are checked (comma-separated).",
        ),
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions selecting tensors by name (comma-separated).",
        ),
        Param("only_nan", "False", "bool", "Fire only for NaN, not for +inf / -inf."),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        only_nan: str | bool = "False",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)
        self.only_nan = parse_bool(self.rule_name, "only_nan", only_nan)
        # NaN and inf counts of a window of steps at once, where the trial has a batch read.
        self._counts = WindowedRows(base_trial, _nan_inf, alone_dtypes=_CHECKED)

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def _names(self, step: int) -> list[str]:
        names = self.selection.names(self.base_trial, step=step)
        if self.selection.given:
            return names
        return [n for n in names if not n.startswith(_XGBOOST_TREES)]

    def invoke_at_step(self, step: int) -> bool:
        names = self._names(step)
        for name in names:
            counts = self._counts.get(name, step, names)
            if counts is not None:
                nan, inf, norm = counts
                where = "elements"
            else:
                found = self._saved_reductions(name, step)
                if found is None:
                    continue  # not checked: shape only, not a float dtype, or empty
                nan = int(np.count_nonzero(np.isnan(found)))
                inf = int(np.count_nonzero(np.isinf(found)))
                norm, where = None, "saved reductions"
            if norm is not None:  # the curve behind the verdict: the tensor's size over steps
                self.evidence.record(step, name, quantity="L2 norm", value=norm)
            if self.only_nan:
                inf = 0
            what = "NaN" if self.only_nan else "NaN or infinite"
            detail = f"{nan} NaN" if self.only_nan else f"{nan} NaN, {inf} inf"
            if self.evidence.compare(
                step,
                name,
                quantity=f"{what} {where}",
                value=nan + inf,
                parameter=ALLOWED,
                threshold=0,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {name} holds {nan + inf} {what} {where} "
                    f"({detail}) at {step_words(self.base_trial, step)}; {ALLOWED}: 0"
                ),
                diagnose=lambda: Diagnosis(
                    DIVERGING,
                    f"{name} became NaN or infinite at {step_words(self.base_trial, step)}: the run diverged; lower "
                    "the learning rate, clip the gradients or look for a bad batch",
                    {
                        "first_non_finite_step": logged_step(self.base_trial, step),
                        "nan": nan,
                        "inf": inf,
                    },
                ),
            ):
                return True
        return False

    def _saved_reductions(self, name: str, step: int) -> np.ndarray | None:
        """The reductions the hook saved of ``name`` at ``step`` when it saved no raw value
        (float ones, to check), else None: nothing to check."""
        tensor = self.base_trial.tensor(name)
        try:
            tensor.value(step)
            return None  # a raw value the window did not cover: not a float one, or empty
        except TensorUnavailableForStep as e:
            if not e.has_reductions:
                return None
        reductions = tensor.reduction_values(step)
        value = np.array([np.asarray(v).reshape(-1)[0] for v in reductions.values()])
        if value.dtype.kind not in "fc" or value.size == 0:
            return None
        return value


def _nan_inf(rows: np.ndarray) -> list[tuple[int, int, float | None]]:
    """(NaN elements, infinite elements, L2 norm) of each row (one step's flattened value)."""
    nan = np.count_nonzero(np.isnan(rows), axis=1)
    inf = np.count_nonzero(np.isinf(rows), axis=1)
    norms = _norm(rows)
    return [(int(a), int(b), c) for a, b, c in zip(nan, inf, norms, strict=True)]


def _norm(rows: np.ndarray) -> list[float | None]:
    """The L2 norm of each row (NaN or infinite when the row holds such a value); None for a
    complex tensor."""
    if rows.dtype.kind != "f":
        return [None] * len(rows)
    with np.errstate(over="ignore", invalid="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
    return [float(v) for v in np.sqrt(squares)]
