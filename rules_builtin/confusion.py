"""Confusion: a class whose samples are too often predicted as something else."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_int, parse_optional_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._labels import (
    confusion_matrix,
    labelled_names,
    labelled_values,
    require_class_labels,
)
from rules_builtin.registry import register

__all__ = ["Confusion"]

# The confusion matrix judged, recorded cell by cell ("true → predicted") for the report,
# which draws it as a table: up to this many classes.
MATRIX_CHARTED = 10
MATRIX_QUANTITY = "confusion matrix (true → predicted)"


@register
class Confusion(Rule):
    """Fires when the confusion matrix of the trained model's labels and predictions has, for
    some true class i (a row with at least one sample), a recall ``M[i,i] / sum_k M[i,k]`` below
    ``min_diag`` or a share ``M[i,j] / sum_k M[i,k]`` (j != i) above ``max_off_diag``.

    When: during training, at an evaluation (a step that saved labels and predictions) once
    the fault is certain: the bounds have been broken at ``_SETTLED`` (3) evaluations of one
    mode in a row, and the worst class's recall has not risen by more than
    ``_IMPROVEMENT`` (0.01) since the first of them, so the model has stopped getting better
    while confused. It fires at the third such evaluation. Else, when the data ends, on the
    newest EVAL step that saved labels and predictions (validation), else the newest training
    (TRAIN, or GLOBAL for XGBoost) one; it fires at that step. Judging every evaluation on its
    own would fire at step 0 of every job (an untrained model's predictions); a model still
    improving is left to improve. A run whose trial never saved labels and predictions checked
    nothing.

    ``M[i, j]`` counts the samples of true class i predicted as j. The rule's description
    writes the same ratios as C[j][i] / sum_j C[j][i] with C = M transposed (columns are true
    classes). Both ratios are normalised by the true class's sample count, so predictions equal
    to the labels never fire.

    Labels: the tensor named ``labels`` saved at the step; if there is none, every tensor of
    the ``labels_collection`` collection saved at the step, concatenated in natural name order.
    Predictions alike. A tensor with two or more axes whose last axis has more than one entry
    (class scores, one-hot) is reduced by argmax over that axis; other values are rounded to
    the nearest integer. The step judged stands alone (no accumulation across steps).

    Categories: N = ``category_no``, else max(label, prediction) + 1. Pairs with a non-finite or
    negative id, or an id >= ``category_no``, are left out (with a warning). A step without
    labels or predictions is skipped (``TensorUnavailableForStep``); a step whose labels and
    predictions differ in length is not evaluated (a warning says so). Labels with continuous
    values (a regression's targets) end the run with "Insufficient information": rounded to
    classes, they would fire on every healthy regression.
    """

    PARAMETERS = (
        Param(
            "category_no",
            None,
            "int",
            "Number of classes; inferred as max(label, prediction) + 1 when not set.",
        ),
        Param("labels", "labels", "str", "Name of the labels tensor."),
        Param("predictions", "predictions", "str", "Name of the predictions tensor."),
        Param(
            "labels_collection",
            "labels",
            "str",
            "Collection holding the labels when no tensor has the labels name.",
        ),
        Param(
            "predictions_collection",
            "predictions",
            "str",
            "Collection holding the predictions when no tensor has the predictions name.",
        ),
        Param("min_diag", "0.9", "float", "Fire when a class's recall is below this."),
        Param(
            "max_off_diag",
            "0.1",
            "float",
            "Fire when a class's share predicted as one other class is above this.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        category_no: str | int | None = None,
        labels: str = "labels",
        predictions: str = "predictions",
        labels_collection: str = "labels",
        predictions_collection: str = "predictions",
        min_diag: str | float = "0.9",
        max_off_diag: str | float = "0.1",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        given = parse_optional_float(name, "category_no", category_no)
        self.category_no = (
            None if given is None else parse_int(name, "category_no", category_no, minimum=1)
        )
        self.labels = str(labels or "").strip()
        self.predictions = str(predictions or "").strip()
        self.labels_collection = TensorSelection(name, labels_collection, all_when_empty=False)
        self.predictions_collection = TensorSelection(
            name, predictions_collection, all_when_empty=False
        )
        self.min_diag = parse_float(name, "min_diag", min_diag)
        self.max_off_diag = parse_float(name, "max_off_diag", max_off_diag)
        self._newest: dict[ModeKeys, int] = {}  # mode -> newest step with labels/predictions
        # mode -> the worst recall of its latest evaluations in a row that broke a bound
        self._history: dict[ModeKeys, list[float]] = {}
        self._warned: set[int] = set()
        self._fired: set[int] = set()  # steps fired at during training
        self._collection_names = (
            str(labels_collection or "").strip(),
            str(predictions_collection or "").strip(),
        )

    def selection_hints(self) -> list[SelectionHint]:
        advice = (
            "Confusion compares labels with predictions saved at the same steps, as "
            "XGBoost's hook saves them (the labels and predictions collections, given "
            "validation_data); for another trial set labels / predictions to the tensors' "
            "names, or labels_collection / predictions_collection to collections holding "
            "them"
        )
        return [
            SelectionHint(
                f"the {kind} (tensor {tensor!r} or collection {collection!r})",
                tuple(p for p in (tensor, collection) if p),
                None,
                advice,
            )
            for kind, tensor, collection in (
                ("labels", self.labels, self._collection_names[0]),
                ("predictions", self.predictions, self._collection_names[1]),
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        """Remember the newest step of each mode that holds labels and predictions, and fire
        when the model has settled while confused (the class docstring)."""
        for name in labelled_names(self.base_trial, step, self.labels, self.labels_collection):
            raw = self.base_trial.tensor(name).value(step)
            require_class_labels(self.rule_name, step, name, raw)
        y = labelled_values(self.base_trial, step, self.labels, self.labels_collection)
        if y is None:
            raise TensorUnavailableForStep(self.labels or "labels", step)
        p = labelled_values(self.base_trial, step, self.predictions, self.predictions_collection)
        if p is None:
            raise TensorUnavailableForStep(self.predictions or "predictions", step)
        mode = self.base_trial.mode(step)
        mode = ModeKeys.TRAIN if mode in (None, ModeKeys.GLOBAL) else mode
        self._newest[mode] = step
        matrix = self._matrix(step, y, p)
        history = self._history.setdefault(mode, [])
        if matrix is None or not _breaks(matrix, self.min_diag, self.max_off_diag):
            history.clear()
            return False
        history.append(_worst_recall(matrix))
        del history[:-_SETTLED]
        if len(history) < _SETTLED or max(history[1:]) > history[0] + _IMPROVEMENT:
            return False
        fired = self._judged(step, matrix)
        if fired:
            self._fired.add(step)
        return fired

    def invoke_at_end(self) -> int | None:
        """Judge the trained model: the newest EVAL step with labels and predictions, else the
        newest training one. The step judged is the one reported when it fires."""
        step = self._newest.get(ModeKeys.EVAL, self._newest.get(ModeKeys.TRAIN))
        if step is None or step in self._fired:
            return None
        return step if self._judge(step) else None

    def _judge(self, step: int) -> bool:
        y = labelled_values(self.base_trial, step, self.labels, self.labels_collection)
        p = labelled_values(self.base_trial, step, self.predictions, self.predictions_collection)
        if y is None or p is None:
            return False
        matrix = self._matrix(step, y, p)
        return matrix is not None and self._judged(step, matrix)

    def _tensors(self, step: int) -> list[str]:
        return labelled_names(
            self.base_trial, step, self.labels, self.labels_collection
        ) + labelled_names(self.base_trial, step, self.predictions, self.predictions_collection)

    def _matrix(self, step: int, y: np.ndarray, p: np.ndarray) -> np.ndarray | None:
        """The confusion matrix of one step's labels and predictions (None, with a warning,
        when their lengths differ)."""
        if y.size != p.size:
            if step not in self._warned:  # judged during training and again at the end
                self._warned.add(step)
                self.logger.warning(
                    "%s: step %d has %d labels but %d predictions; not evaluated",
                    self.rule_name,
                    step,
                    y.size,
                    p.size,
                )
            return None
        matrix, dropped = confusion_matrix(y, p, self.category_no)
        if dropped and step not in self._warned:
            self._warned.add(step)
            self.logger.warning(
                "%s: step %d: %d label/prediction pairs left out (not finite, "
                "negative or >= category_no)",
                self.rule_name,
                step,
                dropped,
            )
        return matrix

    def _judged(self, step: int, matrix: np.ndarray) -> bool:
        """Whether ``matrix`` breaks a bound (the comparisons recorded as evidence), with the
        matrix itself recorded for the report when it is small enough to draw."""
        fired = self._violation(step, self._tensors(step), matrix)
        if len(matrix) <= MATRIX_CHARTED:  # the matrix behind the verdict, for the report
            for (i, j), count in np.ndenumerate(matrix):
                self.evidence.record(
                    step, f"{i} → {j}", quantity=MATRIX_QUANTITY, value=float(count)
                )
        return fired

    def _violation(self, step: int, tensors: list[str], matrix: np.ndarray) -> bool:
        """Whether some row breaks a bound (each comparison recorded, up to the first that
        does)."""
        for i, row in enumerate(matrix):
            total = int(row.sum())
            if total == 0:
                continue  # no sample of class i: nothing to compare
            recall = float(row[i] / total)
            if self.evidence.compare(
                step,
                tensors,
                quantity=f"recall of class {i}",
                value=recall,
                parameter="min_diag",
                threshold=self.min_diag,
                fires_when="<",
                sentence=lambda: (
                    f"{self.rule_name}: class {i}: recall {recall:.4g} < min_diag "
                    f"{self.min_diag:g} at {step_words(self.base_trial, step)}"
                ),
            ):
                return True
            shares = row / total
            shares[i] = 0.0
            j = int(np.argmax(shares))
            if self.evidence.compare(
                step,
                tensors,
                quantity=f"share of class {i} predicted as {j}",
                value=float(shares[j]),
                parameter="max_off_diag",
                threshold=self.max_off_diag,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: class {i}: {shares[j]:.4g} of its samples "
                    f"predicted as {j} > max_off_diag {self.max_off_diag:g} at "
                    f"{step_words(self.base_trial, step)}"
                ),
            ):
                return True
        return False


_SETTLED = 3  # evaluations in a row that break a bound without improving: the fault is certain
_IMPROVEMENT = 0.01  # a rise of the worst recall above this is the model still learning


def _breaks(matrix: np.ndarray, min_diag: float, max_off_diag: float) -> bool:
    """Whether some true class (a row with samples) has a recall below ``min_diag`` or a
    share predicted as one other class above ``max_off_diag`` (no evidence recorded)."""
    totals = matrix.sum(axis=1)
    for i, row in enumerate(matrix):
        if totals[i] == 0:
            continue
        shares = row / totals[i]
        if shares[i] < min_diag:
            return True
        shares[i] = 0.0
        if shares.max() > max_off_diag:
            return True
    return False


def _worst_recall(matrix: np.ndarray) -> float:
    totals = matrix.sum(axis=1)
    recalls = [matrix[i, i] / totals[i] for i in range(len(matrix)) if totals[i]]
    return float(min(recalls)) if recalls else 1.0
