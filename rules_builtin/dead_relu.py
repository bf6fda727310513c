"""DeadRelu: layers where most ReLU units output zero for (almost) every sample."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._activations import ActivationFinder
from rules_builtin.registry import register

__all__ = ["DeadRelu", "dead_percent"]


def dead_percent(outputs: np.ndarray, threshold_inactivity: float) -> float | None:
    """The percentage of units of one ReLU output tensor that are dead: positive for fewer
    than ``threshold_inactivity`` % of the samples. Axis 0 is the batch; every other element
    is a unit. None for a scalar."""
    array = np.asarray(outputs)
    if array.ndim == 0 or array.size == 0:
        return None
    per_unit = array.reshape(array.shape[0], -1)
    activity: np.ndarray = 100.0 * np.count_nonzero(per_unit > 0, axis=0) / per_unit.shape[0]
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / activity.size


@register
class DeadRelu(Rule):
    """Fires at a step when, for any ReLU output tensor saved at that step, more than
    ``threshold_layer`` % (default 50) of its units are dead.

    Tensors: those matching ``tensor_regex`` when it is given. By default, the ReLU outputs
    the trial holds, whatever framework wrote it (``rules_builtin._activations``): tensors
    named like SageMaker's ``relu_output`` collection (``.*relu_output``), and the outputs of
    layers that are ReLUs by their values (a Keras ``ReLU()`` layer, ``Dense(activation=
    "relu")`` when its kernel and bias are saved: its outputs, when they are not saved, are
    computed as ``relu(inputs @ kernel + bias)`` from the values saved at the step, and its
    function is the one whose result the next layer's saved inputs hold, else its name) or
    by their name (PyTorch ``relu1_output_0``, Keras ``hidden_relu/outputs``), and the
    tensors of a collection the user named ``relu_output`` (``CollectionConfig(
    "relu_output")``). Each call of a PyTorch module is judged on its own: a ResNet block that reuses one ``nn.ReLU`` saves
    ``relu_output_0``, ``relu_output_1``, ... and a dead second call fires.

    A tensor is one layer's ReLU output for a batch: axis 0 is the sample, every other
    element is a unit (a neuron of a dense layer; a channel at one position of a convolution).
    A unit is dead when its output is > 0 for fewer than ``threshold_inactivity`` % (default
    1) of the batch's samples; a 1-d tensor is one unit over its samples. Each step is judged
    on its own batch, TRAIN and EVAL steps alike (a dead unit is dead in both). A layer
    initialised with zeros is all dead and fires at step 0.
    """

    PARAMETERS = (
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions of the ReLU output tensors; default: every ReLU output "
            "the trial holds, found by name and by value (see above).",
        ),
        Param(
            "threshold_inactivity",
            "1.0",
            "float",
            "A unit active for fewer than this percentage of samples is dead.",
        ),
        Param(
            "threshold_layer",
            "50.0",
            "float",
            "Fire when more than this percentage of a layer's units are dead.",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | None = None,
        threshold_inactivity: str | float = "1.0",
        threshold_layer: str | float = "50.0",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, None, tensor_regex)
        self.finder = ActivationFinder(base_trial)
        self.threshold_inactivity = parse_float(name, "threshold_inactivity", threshold_inactivity)
        self.threshold_layer = parse_float(name, "threshold_layer", threshold_layer)
        # dead_percent of a window of steps at once where the trial has a batch read, else of
        # the step's value alone (any dtype, as dead_percent takes it).
        self._dead = WindowedRows(
            base_trial, self._dead_rows, dtypes=_NUMBERS, flatten=False, alone_dtypes=None
        )

    def _dead_rows(self, stacked: np.ndarray) -> list[float | None]:
        """``dead_percent`` of each step's value in a window (``stacked``: one per row), the
        same numbers for a window of one step."""
        if stacked.ndim < 2:
            return [None] * len(stacked)  # scalars: dead_percent has no answer
        per_unit = stacked.reshape(stacked.shape[0], stacked.shape[1], -1)
        activity = 100.0 * np.count_nonzero(per_unit > 0, axis=1) / per_unit.shape[1]
        dead = np.count_nonzero(activity < self.threshold_inactivity, axis=1)
        return [100.0 * float(n) / activity.shape[1] for n in dead]

    def selection_hints(self) -> list[SelectionHint]:
        if self.selection.given:
            return [self.selection.hint()]
        return [
            SelectionHint(
                "the default (ReLU layer outputs, by name and by value)",
                ("relu_output", "relu"),
                "tensor_regex",
                "no ReLU layer output was found by name or by value; if the model "
                "has ReLU layers, save their outputs (Keras: the layers "
                "collection; PyTorch: a collection whose include_regex matches "
                "the ReLU modules' _output_0 tensors)",
            )
        ]

    def _names(self, step: int) -> list[str]:
        if self.selection.given:
            return self.selection.names(self.base_trial, step=step)
        return self.finder.tensors("relu", "outputs", step)

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        names = self._names(step)
        for name in names:
            computed = not self.selection.given and self.finder.computes_output(name)
            dead = None if computed else self._dead.get(name, step, names)
            if computed:  # a Dense layer's unsaved outputs: relu(inputs @ kernel + bias)
                value = self.finder.output_value(name, step)
                dead = None if value is None else dead_percent(value, self.threshold_inactivity)
            if dead is None:
                continue
            if self.evidence.compare(
                step,
                name,
                quantity="dead units (%)"
                + (" of relu(inputs @ kernel + bias)" if computed else ""),
                value=dead,
                parameter="threshold_layer",
                threshold=self.threshold_layer,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {dead:.1f}% of the units of {name} are dead "
                    f"(> threshold_layer={self.threshold_layer:g}%) at {step_words(self.base_trial, step)}"
                ),
            ):
                fired = True
        return fired


_NUMBERS = [np.dtype(t) for t in "bBhHiIlLqQefd"]
