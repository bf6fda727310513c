"""SaturatedActivation: tanh and sigmoid layers whose inputs sit where the function is flat."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_float
from rules_builtin._select import TensorSelection
from rules_builtin.registry import register

__all__ = ["SaturatedActivation", "activation_of", "saturated_percent"]


def activation_of(name: str) -> str | None:
    """``"tanh"`` or ``"sigmoid"``: whichever occurs last in the tensor name (any case), as the
    innermost scope names the layer; None for neither."""
    lower = name.lower()
    found = {fn: lower.rfind(fn) for fn in ("tanh", "sigmoid")}
    best = max(found, key=lambda fn: found[fn])
    return best if found[best] >= 0 else None


def saturated_percent(inputs: np.ndarray, low: float, high: float,
                      threshold_inactivity: float) -> float | None:
    """The percentage of units of one activation-input tensor that are saturated: inside
    (``low``, ``high``) for fewer than ``threshold_inactivity`` % of the samples. Axis 0 is
    the batch; every other element is a unit. None for a scalar."""
    array = np.asarray(inputs)
    if array.ndim == 0 or array.size == 0:
        return None
    per_unit = array.reshape(array.shape[0], -1)
    active = (per_unit > low) & (per_unit < high)
    activity = 100.0 * np.count_nonzero(active, axis=0) / per_unit.shape[0]
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / activity.size


@register
class SaturatedActivation(Rule):
    """Fires at a step when, for any selected tanh or sigmoid *input* tensor saved at that
    step, more than ``threshold_layer`` % (default 50) of its units are saturated.

    A unit is saturated when its input lies outside the open interval
    (``threshold_<fn>_min``, ``threshold_<fn>_max``) for all but fewer than
    ``threshold_inactivity`` % (default 1) of the batch's samples, i.e. it is active (inside)
    for fewer than ``threshold_inactivity`` % of them. Axis 0 of a tensor is the sample,
    every other element is a unit; each step is judged on its own batch. The defaults,
    (-9.4999, 9.4999) for tanh and (-23, 16.99999) for sigmoid, are where the derivative
    falls below about 1e-7.

    Tensors: the union of ``collection_names`` and ``tensor_regex`` (default
    ``.*tanh_input|.*sigmoid_input``). Which function's thresholds apply is decided by the
    tensor name: the last of "tanh" / "sigmoid" in it; a tensor naming neither is skipped.
    The 2020 tuple parameters ``threshold_tanh`` / ``threshold_sigmoid`` are not accepted.
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections of activation inputs to check."),
        Param("tensor_regex", ".*tanh_input|.*sigmoid_input", "list",
              "Regular expressions of tanh / sigmoid input tensors."),
        Param("threshold_tanh_min", "-9.4999", "float",
              "tanh inputs at or below this are saturated."),
        Param("threshold_tanh_max", "9.4999", "float",
              "tanh inputs at or above this are saturated."),
        Param("threshold_sigmoid_min", "-23", "float",
              "sigmoid inputs at or below this are saturated."),
        Param("threshold_sigmoid_max", "16.99999", "float",
              "sigmoid inputs at or above this are saturated."),
        Param("threshold_inactivity", "1.0", "float",
              "A unit active for fewer than this percentage of samples is saturated."),
        Param("threshold_layer", "50.0", "float",
              "Fire when more than this percentage of a layer's units are saturated."),
    )

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = ".*tanh_input|.*sigmoid_input",
                 threshold_tanh_min: str | float = "-9.4999",
                 threshold_tanh_max: str | float = "9.4999",
                 threshold_sigmoid_min: str | float = "-23",
                 threshold_sigmoid_max: str | float = "16.99999",
                 threshold_inactivity: str | float = "1.0", threshold_layer: str | float = "50.0",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, collection_names, tensor_regex)
        self.bounds = {
            "tanh": self._bounds("tanh", threshold_tanh_min, threshold_tanh_max),
            "sigmoid": self._bounds("sigmoid", threshold_sigmoid_min, threshold_sigmoid_max),
        }
        self.threshold_inactivity = parse_float(name, "threshold_inactivity", threshold_inactivity)
        self.threshold_layer = parse_float(name, "threshold_layer", threshold_layer)

    def _bounds(self, fn: str, low: object, high: object) -> tuple[float, float]:
        name = self.rule_name
        lo = parse_float(name, f"threshold_{fn}_min", low)
        hi = parse_float(name, f"threshold_{fn}_max", high)
        if not lo < hi:
            raise ConfigurationError(f"{name} parameter threshold_{fn}_min must be smaller than "
                                     f"threshold_{fn}_max, got {low!r} and {high!r}")
        return lo, hi

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        for name in self.selection.names(self.base_trial, step=step):
            fn = activation_of(name)
            if fn is None:
                continue
            try:
                value = self.base_trial.tensor(name).value(step)
            except TensorUnavailableForStep:
                continue
            low, high = self.bounds[fn]
            saturated = saturated_percent(value, low, high, self.threshold_inactivity)
            if saturated is not None and saturated > self.threshold_layer:
                self.logger.info("%s: %.1f%% of the units of %s (%s) are saturated (> %g%%) "
                                 "at step %d", self.rule_name, saturated, name, fn,
                                 self.threshold_layer, step)
                fired = True
        return fired
