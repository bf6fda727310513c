"""SimilarAcrossRuns: the same tensor at the same step differs between two training runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.rules.rule import Rule
from rules_builtin._params import Param
from rules_builtin._select import TensorSelection
from rules_builtin.registry import register


@register
class SimilarAcrossRuns(Rule):
    """Fires at a step when a selected tensor saved at that step in the base trial differs
    from the same tensor at the same step of any other trial.

    The same step is the same mode step of the same mode (TRAIN step 7 in both runs, found
    with each trial's own step mapping; GLOBAL steps for trials without modes), so runs that
    interleave evaluation differently are still compared step for step. Tensors or steps
    missing from another trial are not compared: the other trials are expected to be
    complete runs.

    Selection: the union of ``collection_names`` and ``tensor_regex`` (comma-separated); all
    tensors when neither is given.

    Choice of comparison: values differ when their shapes differ, or, for numbers, when
    ``numpy.allclose`` with its default tolerances (rtol 1e-05, atol 1e-08) is false, with
    NaN equal to NaN (two runs that both produce NaN at the same place are alike); other
    dtypes compare exactly. A tensor saved as reductions only in either run is compared by
    the reductions both runs saved.

    ``other_trials`` is a list of Trial objects (the evaluator makes them from
    ``other_trial_<i>`` / ``other_trials``); at least one is required.
    """

    PARAMETERS = (
        Param("other_trials", None, "trials",
              "The trials to compare with (SageMaker: other_trial_<i>, or other_trials).",
              required=True),
        Param("collection_names", None, "list",
              "Collections whose tensors are compared (comma-separated)."),
        Param("tensor_regex", None, "list",
              "Regular expressions selecting tensors by name (comma-separated)."),
    )

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | Any,
                 collection_names: str | None = None, tensor_regex: str | None = None,
                 action_str: str | None = None) -> None:
        others = _as_trials(other_trials)
        super().__init__(base_trial, action_str, others)
        self.others = others
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode is None or mode_step is None:
            return False
        names = self.selection.names(self.base_trial, step=step)
        for other in self.others:
            other_step = other.global_step(mode, mode_step)
            if other_step is None:
                continue
            there = set(other.tensor_names(step=other_step))
            for name in names:
                if name in there and self._differ(name, step, other, other_step):
                    self.logger.info(
                        "%s: %s at step %d differs from trial %s (its step %d)", self.rule_name,
                        name, step, getattr(other, "name", other), other_step)
                    return True
        return False

    def _differ(self, name: str, step: int, other: Any, other_step: int) -> bool:
        mine, theirs = self.base_trial.tensor(name), other.tensor(name)
        try:
            return _values_differ(np.asarray(mine.value(step)),
                                  np.asarray(theirs.value(other_step)))
        except TensorUnavailableForStep:
            pass
        a, b = mine.reduction_values(step), theirs.reduction_values(other_step)
        return any(_values_differ(np.asarray(a[key]), np.asarray(b[key]))
                   for key in a.keys() & b.keys())


def _values_differ(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return True
    if np.array_equal(a, b):
        return False  # the usual answer for runs that agree, and the cheapest
    if a.dtype.kind in "iufc" and b.dtype.kind in "iufc":
        return not np.allclose(a, b, equal_nan=True)
    return True


def _as_trials(other_trials: Any) -> list[Any]:
    """``other_trials`` as a non-empty list of trial objects; ConfigurationError otherwise."""
    if other_trials is None:
        items: list[Any] = []
    elif isinstance(other_trials, (list, tuple)):
        items = list(other_trials)
    else:
        items = [other_trials]
    if not items:
        raise ConfigurationError(
            "SimilarAcrossRuns needs other_trials: the trial(s) to compare with (on SageMaker, "
            "other_trials_s3_input_paths; locally, --other-trials PATH or other_trial_0=PATH)")
    for item in items:
        if not hasattr(item, "tensor_names") or isinstance(item, str):
            raise ConfigurationError(
                "SimilarAcrossRuns parameter other_trials must be a list of trials "
                f"(create_trial(path)), got {item!r}")
    return items

