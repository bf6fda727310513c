"""VanishingGradient: gradients whose mean absolute value falls below a threshold."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float
from rules_builtin._select import TensorSelection
from rules_builtin.registry import register


@register
class VanishingGradient(Rule):
    """Fires at a step when, for any tensor of the ``gradients`` collection saved at that step,
    the mean of its absolute values is below ``threshold`` (default 1e-7).

    The mean is the saved ``mean``/``abs`` reduction when the hook saved reductions only, else
    it is computed from the raw tensor; a tensor saved as a shape only is skipped, and a NaN
    mean never fires. Step 0 is never evaluated: gradients of the first step are not
    meaningful (the 2019 rule tests say "step 0 always returns False"). A trial without a
    ``gradients`` collection has nothing to check: the rule logs a warning once and never
    fires.
    """

    PARAMETERS = (
        Param("threshold", "0.0000001", "float",
              "Fire when a gradient's mean absolute value is below this."),
    )

    def __init__(self, base_trial: Any, threshold: str | float = "0.0000001",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        self.threshold = parse_float(self.rule_name, "threshold", threshold)
        self.selection = TensorSelection(self.rule_name, default_collections=["gradients"],
                                         all_when_empty=False)
        self._warned = False

    def invoke_at_step(self, step: int) -> bool:
        if not self._warned and "gradients" not in self.base_trial.collections():
            self._warned = True
            self.logger.warning("%s: the trial has no 'gradients' collection; nothing to check "
                                "(save gradients with the hook's gradients collection)",
                                self.rule_name)
        if step == 0:
            return False
        for name in self.selection.names(self.base_trial, step=step):
            try:
                found = self.base_trial.tensor(name).reduction_value(step, "mean", abs=True)
            except TensorUnavailableForStep:
                continue
            mean = float(np.asarray(found).reshape(-1)[0])  # saved reductions have shape (1,)
            if mean < self.threshold:
                self.logger.info("%s: mean |%s| = %g < %g at step %d", self.rule_name, name,
                                 mean, self.threshold, step)
                return True
        return False
