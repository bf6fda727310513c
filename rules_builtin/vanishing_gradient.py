"""VanishingGradient: gradients whose mean absolute value falls below a threshold."""

from __future__ import annotations

from typing import Any

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float
from rules_builtin.registry import register


@register
class VanishingGradient(Rule):
    """Fires at a step when, for any tensor of the ``gradients`` collection saved at that step,
    the mean of its absolute values is below ``threshold`` (default 1e-7).

    The mean is the saved ``mean``/``abs`` reduction when the hook saved reductions only, else
    it is computed from the raw tensor. Step 0 is never evaluated: gradients of the first step
    are not meaningful (the 2019 rule tests say "step 0 always returns False").
    """

    PARAMETERS = (
        Param("threshold", "0.0000001", "float",
              "Fire when a gradient's mean absolute value is below this."),
    )

    def __init__(self, base_trial: Any, threshold: str | float = "0.0000001",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        self.threshold = parse_float(self.rule_name, "threshold", threshold)

    def invoke_at_step(self, step: int) -> bool:
        if step == 0:
            return False
        for name in self.base_trial.tensor_names(collection="gradients", step=step):
            try:
                mean = self.base_trial.tensor(name).reduction_value(step, "mean", abs=True)
            except TensorUnavailableForStep:
                continue
            if float(mean) < self.threshold:
                self.logger.info("%s: mean |%s| = %g < %g at step %d", self.rule_name, name,
                                 float(mean), self.threshold, step)
                return True
        return False
