"""AllZero: tensors whose values are all (or mostly) exactly zero."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register

# Saved reductions that are 0 exactly when every element is 0: (name, abs).
_ZERO_MEANS_ALL_ZERO = (
    ("l1", False),
    ("l2", False),
    ("l1", True),
    ("l2", True),
    ("max", True),
    ("mean", True),
    ("sum", True),
)


@register
class AllZero(Rule):
    """Fires at a step when, for any selected tensor saved at that step, the share of its
    elements that are exactly zero is at least ``threshold`` percent (default 100: all of
    them).

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); at
    least one is required (ConfigurationError otherwise). ``threshold`` must be in (0, 100].
    Empty tensors and NaN are never zero. The value read is the one ``Tensor.value(step)``
    returns (the first worker that saved the step).

    Choice: a tensor saved as reductions only is judged, when ``threshold`` is 100, by a saved
    reduction that is zero exactly when every element is (an l1/l2 norm, or the mean, sum or
    max of absolute values); with a lower threshold, or without such a reduction, it is
    skipped, as are shape-only tensors.
    """

    PARAMETERS = (
        Param(
            "collection_names",
            None,
            "list",
            "Collections whose tensors are checked (comma-separated); this or tensor_regex "
            "is required.",
        ),
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions selecting tensors by name (comma-separated); this or "
            "collection_names is required.",
        ),
        Param(
            "threshold",
            "100",
            "float",
            "Fire when at least this percentage of a tensor's elements are zero.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        threshold: str | float = "100",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        self.selection = TensorSelection(
            self.rule_name, collection_names, tensor_regex, all_when_empty=False
        )
        if not self.selection.given:
            raise ConfigurationError(
                f"{self.rule_name} needs collection_names or tensor_regex: name the tensors "
                "to check (for example collection_names=weights,gradients)"
            )
        self.threshold = parse_float(self.rule_name, "threshold", threshold)
        if not 0 < self.threshold <= 100:
            raise ConfigurationError(
                f"{self.rule_name} parameter threshold must be a "
                f"percentage in (0, 100], got {threshold!r}"
            )

        # Zeros of a window of steps at once where the trial has a batch read, else of the
        # step's value alone (any dtype: count_nonzero counts strings and objects too).
        self._zeros = WindowedRows(base_trial, _zeros, dtypes=_NUMBERS, alone_dtypes=None)

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            counts = self._zeros.get(name, step, names)
            if counts is not None:
                zeros, size = counts
                # zeros * 100 >= threshold * size without rounding: all zeros is exactly 100.
                percent: float | None = 100.0 if zeros == size else 100.0 * zeros / size
            else:
                percent = self._from_saved(name, step)
            if percent is None:
                continue  # not checked
            if self.evidence.compare(
                step,
                name,
                quantity="zero elements (%)",
                value=percent,
                parameter="threshold",
                threshold=self.threshold,
                fires_when=">=",
                sentence=lambda: (
                    f"{self.rule_name}: {percent:.4g}% of {name} is zero "
                    f"(>= threshold {self.threshold:g}%) at {step_words(self.base_trial, step)}"
                ),
            ):
                return True
        return False

    def _from_saved(self, name: str, step: int) -> float | None:
        """The percentage of zeros in ``name`` at ``step`` told by the reductions the hook saved
        when it saved no raw value; None when it cannot be told (an empty value, say)."""
        tensor = self.base_trial.tensor(name)
        try:
            tensor.value(step)
        except TensorUnavailableForStep as e:
            return self._from_reductions(tensor, step) if e.has_reductions else None
        return None

    def _from_reductions(self, tensor: Any, step: int) -> float | None:
        if self.threshold < 100:
            return None
        saved = tensor.reduction_values(step)
        for key in _ZERO_MEANS_ALL_ZERO:
            if key in saved:
                return 100.0 if np.asarray(saved[key]).reshape(-1)[0] == 0 else 0.0
        return None


_NUMBERS = [np.dtype(t) for t in "?bBhHiIlLqQefdFD"]


def _zeros(rows: np.ndarray) -> list[tuple[int, int]]:
    """(zero elements, elements) of each row (one step's flattened value)."""
    size = rows.shape[1]
    return [(size - int(n), size) for n in np.count_nonzero(rows, axis=1)]
