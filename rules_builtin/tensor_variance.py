"""TensorVariance: tensors whose variance is above or below given bounds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_optional_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register


@register
class TensorVariance(Rule):
    """Fires at a step when, for any selected tensor saved at that step, the variance of its
    elements is above ``max_threshold`` or below ``min_threshold``. A bound left unset is not
    checked.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); all
    tensors when neither is given. The variance is the saved ``variance`` reduction when the
    hook saved it, else numpy's (ddof=0) of the raw value; a tensor with neither, or whose
    values are not numbers, is skipped. A NaN variance never fires (ExplodingTensor's job).

    Choices: setting neither bound is a ConfigurationError (the rule could never fire), and
    so is ``min_threshold`` > ``max_threshold`` (every value would fire).
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
        Param("max_threshold", None, "float", "Fire when a variance is above this."),
        Param("min_threshold", None, "float", "Fire when a variance is below this."),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        max_threshold: str | float | None = None,
        min_threshold: str | float | None = None,
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, collection_names, tensor_regex)
        self.max_threshold = parse_optional_float(name, "max_threshold", max_threshold)
        self.min_threshold = parse_optional_float(name, "min_threshold", min_threshold)
        if self.max_threshold is None and self.min_threshold is None:
            raise ConfigurationError(f"{name} needs max_threshold or min_threshold (or both)")
        if (
            self.max_threshold is not None
            and self.min_threshold is not None
            and self.min_threshold > self.max_threshold
        ):
            raise ConfigurationError(
                f"{name} parameter min_threshold must not exceed max_threshold, got "
                f"min_threshold={min_threshold!r} and max_threshold={max_threshold!r}"
            )
        # Variances of a window of steps at once where the trial has a batch read, else the
        # step's reduction_value (the hook's saved one where it saved it).
        self._variances = WindowedRows(base_trial, _variances, reduction=("variance", False))

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            variance = self._variance(name, step, names)
            if variance is None:
                continue
            if self.max_threshold is not None and self._compare(
                step, name, variance, "max_threshold", self.max_threshold, ">"
            ):
                return True
            if self.min_threshold is not None and self._compare(
                step, name, variance, "min_threshold", self.min_threshold, "<"
            ):
                return True
        return False

    def _compare(
        self,
        step: int,
        name: str,
        variance: float,
        parameter: str,
        threshold: float,
        fires_when: str,
    ) -> bool:
        return self.evidence.compare(
            step,
            name,
            quantity="variance",
            value=variance,
            parameter=parameter,
            threshold=threshold,
            fires_when=fires_when,
            sentence=lambda: (
                f"{self.rule_name}: variance of {name} is {variance:g} {fires_when} "
                f"{parameter} {threshold:g} at {step_words(self.base_trial, step)}"
            ),
        )

    def _variance(self, name: str, step: int, names: list[str]) -> float | None:
        try:
            found = self._variances.get(name, step, names)
        except TypeError:
            return None  # strings: numpy has no variance of them
        if found is None or np.asarray(found).dtype.kind not in "biuf":
            return None  # a shape only, an empty value, or no numbers
        variance = float(found)
        return None if math.isnan(variance) else variance


def _variances(rows: np.ndarray) -> np.ndarray:
    """``reduction_value(step, "variance")`` of each row (one step's flattened value)."""
    result: np.ndarray = np.var(rows, axis=1)
    return result
