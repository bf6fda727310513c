"""PoorWeightInitialization: signs, in the first training steps, of badly initialised weights."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float, parse_int, parse_regex
from rules_builtin._select import TensorSelection, listed
from rules_builtin.registry import register

_TRAINING = (ModeKeys.TRAIN, ModeKeys.GLOBAL)


@register
class PoorWeightInitialization(Rule):
    """Fires at a training step s among the first ``steps`` (mode step < ``steps``) when any
    of three checks holds at s:

    1. **Activation variances.** Of the tensors matching ``activation_inputs_regex`` saved at
       s (one per layer), with at least two of them: the largest variance divided by the
       smallest is above ``threshold``. A zero smallest variance with a non-zero largest one
       counts as an infinite ratio; all variances zero says nothing.
    2. **Gradient spread.** For some tensor of the ``gradients`` collection saved at s with a
       raw value of at least 2 elements, the 95th minus the 5th percentile of its values is
       below ``distribution_range``. Checked per tensor (the AWS documentation speaks of the
       minimum spread), so one layer with a collapsed gradient distribution is enough.
    3. **Loss not decreasing.** For some size-1 tensor of the ``losses`` collection, no new
       lowest value (strictly lower) has been seen for ``patience`` training steps:
       s - (step of the lowest value so far) >= ``patience``. A NaN loss is never lower (a
       first NaN is replaced by the first number).

    Choices: training steps are TRAIN steps, or every step of a trial without modes, counted
    in TRAIN mode steps; EVAL/PREDICT steps are not evaluated. ``activation_inputs_regex`` is
    one regular expression (``re.search``, not split at commas). Variances are the saved
    ``variance`` reduction, else numpy's (ddof=0) of the raw value. After the first ``steps``
    training steps the rule reads nothing and never fires. Steps are assumed to be visited in
    increasing order (as ``invoke_rule`` does); a step at or before the previous one forgets
    the lowest losses seen.
    """

    PARAMETERS = (
        Param("activation_inputs_regex", ".*relu_input", "str",
              "Regular expression selecting the activation inputs, one tensor per layer."),
        Param("threshold", "10.0", "float",
              "Fire when the largest / smallest variance of activation inputs is above this."),
        Param("distribution_range", "0.001", "float",
              "Fire when a gradient's 95th - 5th percentile is below this."),
        Param("patience", "5", "int",
              "Fire when the loss has not reached a new lowest value for this many steps."),
        Param("steps", "10", "int", "How many training steps, from the first, are checked."),
    )

    def __init__(self, base_trial: Any, activation_inputs_regex: str = ".*relu_input",
                 threshold: str | float = "10.0", distribution_range: str | float = "0.001",
                 patience: str | int = "5", steps: str | int = "10",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.activation_inputs_regex = parse_regex(name, "activation_inputs_regex",
                                              activation_inputs_regex)
        self.threshold = parse_float(name, "threshold", threshold)
        self.distribution_range = parse_float(name, "distribution_range", distribution_range)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.steps = parse_int(name, "steps", steps, minimum=1)
        self.gradients = TensorSelection(name, default_collections=["gradients"],
                                         all_when_empty=False)
        self.losses = TensorSelection(name, default_collections=["losses"], all_when_empty=False)
        self._best_loss: dict[str, tuple[float, int]] = {}  # loss name -> (lowest, its step)
        self._last_step: int | None = None

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._best_loss.clear()  # a new walk over the steps
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in _TRAINING or mode_step is None or mode_step >= self.steps:
            return False
        names = self.base_trial.tensor_names(step=step)
        found = [*self._activation_variances(names, step), *self._gradient_spread(step),
                 *self._loss_not_decreasing(step, mode_step)]
        if found:
            self.logger.info("%s at step %d: %s", self.rule_name, step, listed(found))
        return bool(found)

    def _activation_variances(self, names: list[str], step: int) -> list[str]:
        variances = {}
        for name in names:
            if self.activation_inputs_regex.search(name):
                variance = _variance(self.base_trial.tensor(name), step)
                if variance is not None:
                    variances[name] = variance
        if len(variances) < 2:
            return []
        largest, smallest = max(variances.values()), min(variances.values())
        if largest == 0:
            return []
        ratio = largest / smallest if smallest > 0 else math.inf
        if ratio > self.threshold:
            return [f"activation input variances differ by a factor {ratio:.3g} > "
                    f"{self.threshold:g}"]
        return []

    def _gradient_spread(self, step: int) -> list[str]:
        found = []
        for name in self.gradients.names(self.base_trial, step=step):
            try:
                value = np.asarray(self.base_trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                continue
            if value.size < 2 or value.dtype.kind not in "iuf":
                continue
            low, high = np.percentile(value, [5, 95])
            if high - low < self.distribution_range:
                found.append(f"{name}: 95th - 5th percentile {high - low:.3g} < "
                             f"{self.distribution_range:g}")
        return found

    def _loss_not_decreasing(self, step: int, mode_step: int) -> list[str]:
        found = []
        for name in self.losses.names(self.base_trial, step=step):
            try:
                value = np.asarray(self.base_trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                continue
            if value.size != 1 or value.dtype.kind not in "iuf":
                continue
            loss = float(value.reshape(-1)[0])
            best = self._best_loss.get(name)
            if best is None or loss < best[0] or (math.isnan(best[0]) and not math.isnan(loss)):
                self._best_loss[name] = (loss, mode_step)
            elif mode_step - best[1] >= self.patience:
                found.append(f"{name} has not decreased below {best[0]:g} (step {best[1]}) "
                             f"for {mode_step - best[1]} steps")
        return found


def _variance(tensor: Any, step: int) -> float | None:
    try:
        value = np.asarray(tensor.reduction_value(step, "variance")).reshape(-1)
    except (TensorUnavailableForStep, TypeError):
        return None
    if value.size == 0 or value.dtype.kind not in "iuf" or math.isnan(float(value[0])):
        return None
    return float(value[0])
