"""SimilarAcrossRuns: the same tensor at the same step differs between two training runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from rules_builtin.registry import register

ALLOWED = "differing elements allowed"  # the fixed limit (0) the count is compared with


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

    Evidence: each comparison records the count of ``elements differing from the other
    run`` (every element when the shapes differ; for reductions-only tensors, the differing
    saved reductions) against the fixed limit ``differing elements allowed`` = 0: it fires
    when the count is > 0. That limit is not a parameter.
    """

    PARAMETERS = (
        Param(
            "other_trials",
            None,
            "trials",
            "The trials to compare with (SageMaker: other_trial_<i>, or other_trials).",
            required=True,
        ),
        Param(
            "collection_names",
            None,
            "list",
            "Collections whose tensors are compared (comma-separated).",
        ),
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions selecting tensors by name (comma-separated).",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        other_trials: Sequence[Any] | Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        action_str: str | None = None,
    ) -> None:
        others = _as_trials(other_trials)
        super().__init__(base_trial, action_str, others)
        self.others = others
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

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
                if name not in there:
                    continue
                found = self._differing(name, step, other, other_step)
                if found is None:
                    continue  # reductions only, none saved by both runs: not compared
                count, what = found
                trial = getattr(other, "name", other)
                if self.evidence.compare(
                    step,
                    name,
                    quantity=f"{what} differing from the other run",
                    value=count,
                    parameter=ALLOWED,
                    threshold=0,
                    fires_when=">",
                    sentence=lambda: (
                        f"{self.rule_name}: {name} at step {step} differs from trial "
                        f"{trial} (its step {other_step}): {count} {what} differ; "
                        f"{ALLOWED}: 0"
                    ),
                ):
                    return True
        return False

    def _differing(
        self, name: str, step: int, other: Any, other_step: int
    ) -> tuple[int, str] | None:
        """How many values of ``name`` differ between the runs, and what they are
        ("elements" or "saved reductions"); None when nothing could be compared."""
        mine, theirs = self.base_trial.tensor(name), other.tensor(name)
        try:
            return (
                _count_differing(
                    np.asarray(mine.value(step)), np.asarray(theirs.value(other_step))
                ),
                "elements",
            )
        except TensorUnavailableForStep:
            pass
        a, b = mine.reduction_values(step), theirs.reduction_values(other_step)
        shared = a.keys() & b.keys()
        if not shared:
            return None
        return sum(
            _count_differing(np.asarray(a[key]), np.asarray(b[key])) > 0 for key in shared
        ), "saved reductions"


def _count_differing(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements of ``a`` and ``b`` differ: every one (at least 1) when the shapes
    differ; 0 exactly when they are alike (see the class docstring)."""
    if a.shape != b.shape:
        return max(a.size, b.size, 1)
    # The usual answer for runs that agree, and the cheapest: the same bytes of one numeric
    # or bool dtype are the same values (NaNs included, which the isclose below counts as
    # alike); else np.array_equal once the shapes agree, less its checks.
    if a.dtype == b.dtype and a.dtype.kind in "biufc" and a.tobytes() == b.tobytes():
        return 0
    if bool(np.asanyarray(a == b).all()):
        return 0
    if a.dtype.kind in "iufc" and b.dtype.kind in "iufc":
        return int(np.count_nonzero(~np.isclose(a, b, equal_nan=True)))
    try:
        return max(int(np.count_nonzero(a != b)), 1)
    except (TypeError, ValueError):  # dtypes numpy cannot compare element by element
        return max(a.size, 1)


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
            "other_trials_s3_input_paths; locally, --other-trials PATH or other_trial_0=PATH)"
        )
    for item in items:
        if not hasattr(item, "tensor_names") or isinstance(item, str):
            raise ConfigurationError(
                "SimilarAcrossRuns parameter other_trials must be a list of trials "
                f"(create_trial(path)), got {item!r}"
            )
    return items
