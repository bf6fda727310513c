"""FeatureImportanceOverweight: a few features carry most of the model's feature importance."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register

__all__ = ["FeatureImportanceOverweight"]


@register
class FeatureImportanceOverweight(Rule):
    """Fires at a step when the ``nfeatures`` largest feature importances saved at that step
    sum to more than ``threshold`` of all the importances saved there.

    The importances are the tensors whose names match ``tensor_regex`` (``re.search``; a
    comma-separated list is a union), by default XGBoost's ``feature_importance/weight/<f>``
    scalars. Every element of every matching tensor is one feature's importance, so a single
    vector of importances works too. They are normalised here (divided by their sum), whatever
    the hook did. Non-finite and negative values are ignored.

    XGBoost only reports the features the trees use. While the model has used ``nfeatures``
    or fewer features, their share is 1 by construction (a booster's first trees use a few
    features): such a step is not compared. If the model still uses that few when the data
    ends, its newest step is judged then (and fires: all its importance sits on them). A step
    where no tensor matches is skipped (``TensorUnavailableForStep``); one whose importances
    sum to zero is not fired on.
    """

    PARAMETERS = (
        Param(
            "threshold",
            "0.8",
            "float",
            "Fire when the nfeatures largest importances hold more than this share.",
        ),
        Param("nfeatures", "3", "int", "How many of the largest importances to add up."),
        Param(
            "tensor_regex",
            ".*feature_importance/weight",
            "list",
            "Regexes of the feature-importance tensors.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        threshold: str | float = "0.8",
        nfeatures: str | int = "3",
        tensor_regex: str = ".*feature_importance/weight",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        self.threshold = parse_float(self.rule_name, "threshold", threshold)
        self.nfeatures = parse_int(self.rule_name, "nfeatures", nfeatures, minimum=1)
        self.selection = TensorSelection(
            self.rule_name, tensor_regex=tensor_regex, all_when_empty=False
        )
        self._few: int | None = None  # newest step whose model used <= nfeatures features

    def selection_hints(self) -> list[SelectionHint]:
        return [
            dataclasses.replace(
                self.selection.hint(),
                advice="the importances are XGBoost's: save the feature_importance collection with "
                "the XGBoost hook (gbtree and dart boosters); a deep-learning trial has none",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        names, values = self._importances(step)
        if int(np.count_nonzero(values)) <= self.nfeatures:
            # A booster's first trees use few features: all the importance sits on them by
            # construction. Judged at the end instead, if the model never used more.
            self._few = step
            return False
        self._few = None
        return self._compare(step, names, values)

    def invoke_at_end(self) -> int | None:
        """The final model, when it still uses ``nfeatures`` features or fewer."""
        step = self._few
        if step is None:
            return None
        names, values = self._importances(step)
        return step if self._compare(step, names, values) else None

    def _importances(self, step: int) -> tuple[list[str], np.ndarray]:
        names = self.selection.names(self.base_trial, step=step)
        if not names:
            raise TensorUnavailableForStep(",".join(self.selection.regexes), step)
        values = np.concatenate(
            [
                np.asarray(self.base_trial.tensor(n).value(step), dtype=np.float64).ravel()
                for n in names
            ]
        )
        return names, values[np.isfinite(values) & (values >= 0)]

    def _compare(self, step: int, names: list[str], values: np.ndarray) -> bool:
        total = float(values.sum())
        if total <= 0.0:
            return False
        top = np.sort(values)[::-1][: self.nfeatures]
        share = float(top.sum()) / total
        return self.evidence.compare(
            step,
            names,
            quantity=f"share of the {self.nfeatures} largest feature importances",
            value=share,
            parameter="threshold",
            threshold=self.threshold,
            fires_when=">",
            sentence=lambda: (
                f"{self.rule_name}: the {len(top)} largest of {values.size} feature "
                f"importances hold {share:.4g} > threshold {self.threshold:g} of the total "
                f"at {step_words(self.base_trial, step)}"
            ),
        )
