"""VanishingGradient: gradients whose mean absolute value falls below a threshold."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register


@register
class VanishingGradient(Rule):
    """Fires at a step when, for any tensor of the ``gradients`` collection saved at that step,
    the mean of its absolute values is below ``threshold`` (default 1e-7).

    The mean is the saved ``mean``/``abs`` reduction when the hook saved reductions only, else
    it is computed from the raw tensor; a tensor saved as a shape only is skipped, and a NaN
    mean never fires. Step 0 is never evaluated: gradients of the first step are not
    meaningful (the 2019 rule tests say "step 0 always returns False").

    Evidence: each gradient checked records ``mean |gradient|`` compared with ``threshold``
    (fires when ``<``). A trial without a ``gradients`` collection has nothing to check: the
    rule records no comparison, so the evaluator ends it with
    InsufficientInformationForRuleInvocation rather than NoIssuesFound.
    """

    PARAMETERS = (
        Param(
            "threshold",
            "0.0000001",
            "float",
            "Fire when a gradient's mean absolute value is below this.",
        ),
    )

    def __init__(
        self, base_trial: Any, threshold: str | float = "0.0000001", action_str: str | None = None
    ) -> None:
        super().__init__(base_trial, action_str)
        self.threshold = parse_float(self.rule_name, "threshold", threshold)
        self.selection = TensorSelection(
            self.rule_name, default_collections=["gradients"], all_when_empty=False
        )
        # mean |g| of a window of steps at once where the trial has a batch read, else the
        # step's reduction_value (the hook's saved one where it saved it).
        self._means = WindowedRows(base_trial, _mean_abs, reduction=("mean", True))

    def selection_hints(self) -> list[SelectionHint]:
        # No selection parameter: the gradients collection is the only thing it reads.
        return [
            dataclasses.replace(
                self.selection.hint(),
                parameter=None,
                advice="save the gradients collection with the debugger hook",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        if step == 0:
            return False
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            found = self._means.get(name, step, names)
            if found is None:
                continue  # a shape only
            mean = float(found)
            if self.evidence.compare(
                step,
                name,
                quantity="mean |gradient|",
                value=mean,
                parameter="threshold",
                threshold=self.threshold,
                fires_when="<",
                sentence=lambda: (
                    f"{self.rule_name}: mean |{name}| = {mean:g} < threshold "
                    f"{self.threshold:g} at {step_words(self.base_trial, step)}"
                ),
            ):
                return True
        return False


def _mean_abs(rows: np.ndarray) -> np.ndarray:
    """``reduction_value(step, "mean", abs=True)`` of each row (one step's flattened value)."""
    result: np.ndarray = np.mean(np.absolute(rows), axis=1)
    return result
