"""SaturatedActivation: tanh and sigmoid layers whose inputs sit where the function is flat."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from rules_builtin._activations import ActivationFinder
from rules_builtin.registry import register

__all__ = ["SaturatedActivation", "activation_of", "saturated_percent"]


def activation_of(name: str) -> str | None:
    """``"tanh"`` or ``"sigmoid"``: whichever occurs last in the tensor name (any case), as the
    innermost scope names the layer; None for neither."""
    lower = name.lower()
    found = {fn: lower.rfind(fn) for fn in ("tanh", "sigmoid")}
    best = max(found, key=lambda fn: found[fn])
    return best if found[best] >= 0 else None


def saturated_percent(
    inputs: np.ndarray, low: float, high: float, threshold_inactivity: float
) -> float | None:
    """The percentage of units of one activation-input tensor that are saturated: inside
    (``low``, ``high``) for fewer than ``threshold_inactivity`` % of the samples. Axis 0 is
    the batch; every other element is a unit. None for a scalar."""
    array = np.asarray(inputs)
    if array.ndim == 0 or array.size == 0:
        return None
    per_unit = array.reshape(array.shape[0], -1)
    active = (per_unit > low) & (per_unit < high)
    activity: np.ndarray = 100.0 * np.count_nonzero(active, axis=0) / per_unit.shape[0]
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / activity.size


@register
class SaturatedActivation(Rule):
    """Fires at a step when, for any tanh or sigmoid *input* tensor saved at that step, more
    than ``threshold_layer`` % (default 50) of its units are saturated.

    A unit is saturated when its input lies outside the open interval
    (``threshold_<fn>_min``, ``threshold_<fn>_max``) for all but fewer than
    ``threshold_inactivity`` % (default 1) of the batch's samples, i.e. it is active (inside)
    for fewer than ``threshold_inactivity`` % of them. Axis 0 of a tensor is the sample,
    every other element is a unit; each step is judged on its own batch, TRAIN and EVAL steps
    alike. The defaults, (-9.4999, 9.4999) for tanh and (-23, 16.99999) for sigmoid, are where
    the derivative falls below about 1e-7.

    Tensors: the union of ``collection_names`` and ``tensor_regex`` when either is given; by
    default, the tanh and sigmoid layer inputs the trial holds, whatever framework wrote it
    (``rules_builtin._activations``): tensors named like SageMaker's ``tanh_input`` /
    ``sigmoid_input`` collections, and the inputs of layers that are tanh or sigmoid by their
    values (a Keras ``Activation("tanh")`` layer, auto-named ``activation``) or their name
    (PyTorch ``tanh1_input_0``; every call of a shared module on its own), and the tensors of
    collections the user named ``tanh_input`` / ``sigmoid_input``. For a Keras
    ``Dense(units, activation="tanh")`` the saved ``inputs`` are the layer's input, not the
    function's: the function's input ``inputs @ kernel + bias`` is computed from the kernel and
    bias saved at the step (a step without them is not checked for that layer). Which
    function's thresholds apply is the layer's function
    when it is known, else the last of "tanh" / "sigmoid" in the tensor name; a selected
    tensor that is neither is skipped. A layer whose values cannot tell tanh from sigmoid
    (its outputs are 1: both saturate there) is saturated only by both functions' bounds.
    The 2020 tuple parameters ``threshold_tanh`` / ``threshold_sigmoid`` are not accepted.
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections of activation inputs to check."),
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions of tanh / sigmoid input tensors; default: every tanh and "
            "sigmoid layer input the trial holds, found by name and by value.",
        ),
        Param(
            "threshold_tanh_min", "-9.4999", "float", "tanh inputs at or below this are saturated."
        ),
        Param(
            "threshold_tanh_max", "9.4999", "float", "tanh inputs at or above this are saturated."
        ),
        Param(
            "threshold_sigmoid_min",
            "-23",
            "float",
            "sigmoid inputs at or below this are saturated.",
        ),
        Param(
            "threshold_sigmoid_max",
            "16.99999",
            "float",
            "sigmoid inputs at or above this are saturated.",
        ),
        Param(
            "threshold_inactivity",
            "1.0",
            "float",
            "A unit active for fewer than this percentage of samples is saturated.",
        ),
        Param(
            "threshold_layer",
            "50.0",
            "float",
            "Fire when more than this percentage of a layer's units are saturated.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        threshold_tanh_min: str | float = "-9.4999",
        threshold_tanh_max: str | float = "9.4999",
        threshold_sigmoid_min: str | float = "-23",
        threshold_sigmoid_max: str | float = "16.99999",
        threshold_inactivity: str | float = "1.0",
        threshold_layer: str | float = "50.0",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, collection_names, tensor_regex)
        self.finder = ActivationFinder(base_trial)
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
            raise ConfigurationError(
                f"{name} parameter threshold_{fn}_min must be smaller than "
                f"threshold_{fn}_max, got {low!r} and {high!r}"
            )
        return lo, hi

    def selection_hints(self) -> list[SelectionHint]:
        if self.selection.given:
            return [self.selection.hint()]
        return [
            SelectionHint(
                "the default (tanh and sigmoid layer inputs, by name and by value)",
                ("tanh_input", "sigmoid_input", "tanh", "sigmoid"),
                "tensor_regex",
                "no tanh or sigmoid layer input was found by name or by value; "
                "if the model has such layers, save their inputs (Keras: the "
                "layers collection; PyTorch: a collection whose include_regex "
                "matches the modules' _input_0 tensors)",
            )
        ]

    def _names(self, step: int) -> list[str]:
        if self.selection.given:
            return self.selection.names(self.base_trial, step=step)
        return sorted(
            {
                *self.finder.tensors("tanh", "inputs", step),
                *self.finder.tensors("sigmoid", "inputs", step),
            }
        )

    def _input(self, name: str, step: int) -> Any:
        """The function's input: a selected tensor as saved; a found layer's through the
        finder (a Dense layer's input times its kernel, plus its bias)."""
        if not self.selection.given:
            return self.finder.input_value(name, step)
        try:
            return self.base_trial.tensor(name).value(step)
        except TensorUnavailableForStep:
            return None

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        for name in self._names(step):
            fn = self.finder.function_of(name) or activation_of(name) or ""
            fns = [f for f in fn.split("|") if f in self.bounds]
            value = self._input(name, step) if fns else None
            if value is None:
                continue
            # A layer saturated at 1 may be either: saturated only when it is for both.
            found = [
                saturated_percent(value, *self.bounds[f], self.threshold_inactivity) for f in fns
            ]
            saturated = None if None in found else min(found)  # type: ignore[type-var]
            if saturated is None:
                continue
            fn = " or ".join(fns)
            if self.evidence.compare(
                step,
                name,
                quantity=f"saturated {fn} units (%)",
                value=saturated,
                parameter="threshold_layer",
                threshold=self.threshold_layer,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {saturated:.1f}% of the units of {name} ({fn}) "
                    f"are saturated (> threshold_layer={self.threshold_layer:g}%) at "
                    f"step {step}"
                ),
            ):
                fired = True
        return fired
