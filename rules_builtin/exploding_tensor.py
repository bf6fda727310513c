"""ExplodingTensor: tensors holding NaN (or, unless ``only_nan``, infinite) values."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_bool
from rules_builtin._select import TensorSelection
from rules_builtin.registry import register


@register
class ExplodingTensor(Rule):
    """Fires at a step when any selected tensor saved at that step holds a NaN, or, unless
    ``only_nan``, a +inf or -inf.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); all
    tensors when neither is given. Only float and complex tensors are checked (other dtypes
    cannot hold non-finite values). The value read is the one ``Tensor.value(step)`` returns
    (the first worker that saved the step).

    Choice: a tensor saved as reductions only (no raw value) is judged by its saved
    reductions: a NaN reduction counts as NaN; with ``only_nan`` false, any non-finite
    reduction counts. A mean or sum can overflow to inf for huge finite values; that is
    reported too, as it is an exploding tensor all the same. A tensor saved as a shape only is
    skipped.
    """

    PARAMETERS = (
        Param("collection_names", None, "list",
              "Collections whose tensors are checked (comma-separated)."),
        Param("tensor_regex", None, "list",
              "Regular expressions selecting tensors by name (comma-separated)."),
        Param("only_nan", "False", "bool",
              "Fire only for NaN, not for +inf / -inf."),
    )

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, only_nan: str | bool = "False",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)
        self.only_nan = parse_bool(self.rule_name, "only_nan", only_nan)

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selection.names(self.base_trial, step=step):
            what = self._non_finite(name, step)
            if what is not None:
                self.logger.info("%s: %s holds %s at step %d", self.rule_name, name, what, step)
                return True
        return False

    def _non_finite(self, name: str, step: int) -> str | None:
        """What is wrong with ``name`` at ``step`` ("NaN", "inf", ...), or None."""
        tensor = self.base_trial.tensor(name)
        try:
            value = tensor.value(step)
        except TensorUnavailableForStep as e:
            if not e.has_reductions:
                return None
            reductions = tensor.reduction_values(step)
            value = np.array([np.asarray(v).reshape(-1)[0] for v in reductions.values()])
            found = self._check(value)
            return f"{found} in a saved reduction" if found else None
        return self._check(np.asarray(value))

    def _check(self, value: np.ndarray) -> str | None:
        if value.dtype.kind not in "fc" or value.size == 0:
            return None
        if np.isnan(value).any():
            return "NaN"
        if not self.only_nan and np.isinf(value).any():
            return "inf"
        return None
