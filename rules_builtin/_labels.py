"""Labels and predictions as class ids, for the classification rules (ClassImbalance,
Confusion, CreateXgboostReport): ``class_ids`` (a saved tensor as integer class ids),
``confusion_matrix``, and ``labelled_names`` / ``labelled_values`` (a step's labels or
predictions, by tensor name or collection)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evaluator.errors import InsufficientInformationForRuleInvocation
from evaluator.rules.kit.selection import TensorSelection

__all__ = [
    "class_ids",
    "confusion_matrix",
    "labelled_names",
    "labelled_values",
    "natural_key",
    "require_class_labels",
]

# A label further than this from an integer is a continuous target, not a class id.
_NOT_AN_ID = 1e-6


def natural_key(name: str) -> tuple[str, int, str]:
    """Sort key that puts ``labels_2`` before ``labels_10``."""
    found = re.search(r"(\d+)$", name)
    if found is None:
        return (name, -1, name)
    return (name[: found.start()], int(found.group(1)), name)


def class_ids(value: Any, *, argmax: bool | None = None) -> np.ndarray:
    """A saved labels or predictions tensor as a 1-d float array of class ids (NaN where a value
    is not finite).

    ``argmax=True``: argmax over the last axis (per-class scores), ``False``: values are class
    ids, rounded to the nearest integer (so binary probabilities are thresholded at 0.5).
    ``None`` infers it: argmax when the tensor has two or more axes and its last axis has more
    than one entry (probabilities or one-hot rows), else rounding.
    """
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        array = array.astype(np.float64)
    if argmax is None:
        argmax = array.ndim >= 2 and array.shape[-1] > 1
    if argmax and array.ndim >= 1 and array.size:
        classes: np.ndarray = np.argmax(array, axis=-1).ravel().astype(np.float64)
        return classes
    rounded: np.ndarray = np.rint(array.ravel().astype(np.float64))
    return rounded


def require_class_labels(rule: str, step: int, name: str, value: Any) -> None:
    """Raise ``InsufficientInformationForRuleInvocation`` when a labels tensor holds continuous
    values (a regression's targets, as XGBoost's hook saves them for ``reg:*`` objectives):
    rounded to "classes" they would make every classification rule fire on a healthy run.
    Per-class rows (two or more axes, a last axis longer than 1) are scores and pass."""
    array = np.asarray(value)
    if array.dtype.kind != "f" or (array.ndim >= 2 and array.shape[-1] > 1):
        return
    flat = array.ravel()
    flat = flat[np.isfinite(flat)]
    off = np.abs(flat - np.rint(flat)) > _NOT_AN_ID
    if not off.any():
        return
    example = float(flat[int(np.argmax(off))])
    raise InsufficientInformationForRuleInvocation(
        rule,
        f"the labels {name!r} at step {step} are continuous values (e.g. {example:.6g}), "
        "a regression's targets, not class ids: this rule judges classification; for a "
        "regression, watch the loss with LossNotDecreasing, Overfit or Overtraining",
    )


def confusion_matrix(
    labels: np.ndarray, predictions: np.ndarray, category_no: int | None = None
) -> tuple[np.ndarray, int]:
    """``(M, dropped)``: ``M[i, j]`` counts samples of true class ``i`` predicted as ``j``.

    N is ``category_no``, else max(label, prediction) + 1. Pairs with a NaN, a negative id or an
    id >= N are not counted; ``dropped`` says how many.
    """
    usable = np.isfinite(labels) & np.isfinite(predictions) & (labels >= 0) & (predictions >= 0)
    y = labels[usable].astype(np.int64)
    p = predictions[usable].astype(np.int64)
    if category_no is None:
        n = int(max(y.max(initial=-1), p.max(initial=-1))) + 1
    else:
        n = category_no
    inside = (y < n) & (p < n)
    matrix = np.zeros((n, n), dtype=np.int64)
    np.add.at(matrix, (y[inside], p[inside]), 1)
    return matrix, int(labels.size - np.count_nonzero(inside))


def labelled_names(trial: Any, step: int, name: str, selection: TensorSelection) -> list[str]:
    """The tensors ``labelled_values`` reads at ``step``: ``[name]`` if it was saved there, else
    those of ``selection`` saved there, in natural name order."""
    at_step = set(trial.tensor_names(step=step))
    return (
        [name]
        if name and name in at_step
        else sorted(selection.names(trial, step=step), key=natural_key)
    )


def labelled_values(
    trial: Any, step: int, name: str, selection: TensorSelection, *, argmax: bool | None = None
) -> np.ndarray | None:
    """Class ids at ``step``: the tensor called ``name`` if it was saved there, else every
    tensor of ``selection`` saved there (natural name order, concatenated); None if neither."""
    names = labelled_names(trial, step, name, selection)
    if not names:
        return None
    parts = [class_ids(trial.tensor(n).value(step), argmax=argmax) for n in names]
    return np.concatenate(parts)
