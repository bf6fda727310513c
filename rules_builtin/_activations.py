"""Which saved tensors are the inputs and outputs of ReLU, tanh and sigmoid layers.

SageMaker's default selections (``.*relu_output``, ``.*tanh_input``, ``.*sigmoid_input``) name
tensors of collections the SDK defined; smdebug's framework hooks name layer tensors otherwise
(docs/hook-naming.md):

* TensorFlow 2 Keras: ``<layer>/inputs`` and ``<layer>/outputs`` (``re_lu/outputs``,
  ``activation/inputs``, ``hidden_relu/outputs``);
* PyTorch and MXNet: ``<module>_input_<i>`` and ``<module>_output_<i>`` (``relu1_output_0``,
  ``Net_relu1_output_0``, ``relu0_output_0``). The hook counts a module's tensors through the
  step, so the n-th call of a one-input module (a ResNet block reusing one ``nn.ReLU``, a tanh
  shared by two branches) writes ``_input_<n>`` and ``_output_<n>``: each call is a layer of
  its own here (``relu1``, ``relu1[1]``, ...), judged on its own;
* TensorFlow 1 graphs: op outputs such as ``dense/Relu:0`` (ReLU outputs only: the input of a
  TF1 Tanh op has no name of its own).

``ActivationFinder`` finds the layers and decides each one's function, once per layer:

1. by values: at a step where the layer's input and output were saved with one shape, the
   function ``f`` with ``output == f(input)`` (a Keras ``Activation("tanh")`` layer is
   auto-named ``activation``);
2. for a Keras ``Dense``-like layer whose kernel and bias are saved too (checked before 1,
   as a square Dense has one shape in and out), the function with
   ``output == f(input @ kernel + bias)`` (``Dense(64, activation="relu")``);
3. by name: the last of "relu" ("re_lu"), "tanh", "sigmoid" in the layer's name.

Values come first, the name only when they cannot tell (a linear ``Dense`` named
``pre_sigmoid`` is no sigmoid). A layer whose function cannot be told (its input is all zeros,
say) is asked again at later steps, a few times at most. Only these three functions (and the identity, for linear
layers) are recognised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.errors import SMDebugError
from evaluator.trial.patterns import compile_pattern, matching_names

__all__ = ["FUNCTIONS", "ActivationFinder", "Layer", "function_in_name", "layers_of"]

FUNCTIONS = ("relu", "tanh", "sigmoid")

# SageMaker collection names first, then the hooks' layer tensors.
_SAGEMAKER = re.compile(r"(?P<fn>relu|tanh|sigmoid)_(?P<side>input|output)s?$", re.I)
_TF1_RELU = re.compile(r"(^|/)(Relu|Relu6|LeakyRelu)(_\d+)?:\d+$")  # a TF1 graph op's output
_COLLECTION = re.compile(r"^(?P<fn>relu|tanh|sigmoid)_(?P<side>input|output)s?$", re.I)
_KERAS = re.compile(r"^(?P<layer>.+)/(?P<side>input|output)s$")
_MODULE = re.compile(r"^(?P<layer>.+)_(?P<side>input|output)_(?P<index>\d+)$")
_NAME_FUNCTION = re.compile(r"re_?lu|tanh|sigmoid", re.I)
_VALUE_ATTEMPTS = 5  # steps at which a layer's values are asked before its name is trusted
_PAIR_TOLERANCE = 1e-3  # float32 activations against a float64 recomputation
_DENSE_TOLERANCE = 0.1  # the saved weights may already hold the batch's update


@dataclass
class Layer:
    """One layer's saved input and output tensor names (either may be missing). ``name`` is
    the layer's key (``relu1[1]`` for the second call of module ``relu1``); ``module`` the
    name it was saved under, which name-based decisions read."""

    name: str
    module: str = ""
    inputs: str | None = None
    outputs: str | None = None
    function: str | None = None  # "relu", "tanh", "sigmoid" or "identity" once known
    decided_by: str | None = None  # "name", "values", "weights"
    has_weights: bool = False  # a kernel was saved with it: its inputs feed a matmul first
    attempts: int = 0  # value checks tried; a name-based answer is checked a few times


def function_in_name(name: str) -> str | None:
    """The activation named last in ``name`` (``re_lu`` counts as relu), or None."""
    found = _NAME_FUNCTION.findall(name)
    if not found:
        return None
    last = found[-1].lower().replace("_", "")
    return last if last in FUNCTIONS else None


def layers_of(names: list[str]) -> dict[str, Layer]:
    """Layers with input/output tensors among ``names``: one per Keras layer, one per call of
    a PyTorch / MXNet module (``_input_<n>`` pairs with ``_output_<n>``)."""
    layers: dict[str, Layer] = {}
    for name in sorted(names):
        match = _KERAS.match(name) or _MODULE.match(name)
        if match is None:
            continue
        module, index = match["layer"], match.groupdict().get("index")
        key = module if index in (None, "0") else f"{module}[{index}]"
        layer = layers.setdefault(key, Layer(key, module))
        if match["side"] == "input":
            layer.inputs = name
        else:
            layer.outputs = name
    return layers


_F: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),  # no overflow for large |x|
    "identity": lambda x: x,  # a linear layer: known, and no activation
}


class ActivationFinder:
    """The saved tensors of one activation function's layers, found as the module docstring
    says; decisions are remembered for the whole run."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._layers: dict[str, Layer] = {}
        self._known: set[str] = set()
        self._kinds: dict[str, tuple[str, str] | None] = {}  # name -> _sagemaker_kind(name)
        self._collected: dict[str, str] = {}  # tensor of a SageMaker-named collection -> fn
        self._members: dict[str, set[str]] = {}  # such a collection -> its tensors seen
        self._matched: set[tuple[str, str]] = set()  # (collection, name) pairs matched

    def tensors(self, function: str, side: str, step: int) -> list[str]:
        """Names of the ``side`` ("inputs" or "outputs") tensors of ``function`` layers saved
        at global ``step``: SageMaker-named tensors, the tensors of collections named like
        SageMaker's (a ``CollectionConfig("sigmoid_input")`` the user configured), and the
        layers found by value or name."""
        names = self.trial.tensor_names(step=step)
        kinds, wanted = self._kinds, (function, side)
        found = set()
        for n in names:  # every name is matched once per run, not at every step
            kind = kinds.get(n, _UNSEEN)
            if kind is _UNSEEN:
                kind = kinds[n] = _sagemaker_kind(n)
            if kind == wanted:
                found.add(n)
        found.update(self._collection_tensors(wanted, names))
        self._update(names)
        for layer in self._layers.values():
            tensor = layer.inputs if side == "inputs" else layer.outputs
            if tensor is None or tensor not in names:
                continue
            if layer.decided_by in (None, "name") and layer.attempts < _VALUE_ATTEMPTS:
                self._decide(layer, step, names)
            if layer.function == function:
                found.add(tensor)
        return sorted(found)

    def function_of(self, tensor: str) -> str | None:
        """The function of the layer ``tensor`` belongs to, when decided."""
        sagemaker = _SAGEMAKER.search(tensor)
        if sagemaker:
            return sagemaker["fn"].lower()
        if tensor in self._collected:
            return self._collected[tensor]
        for layer in self._layers.values():
            if tensor in (layer.inputs, layer.outputs):
                return layer.function
        return None

    def input_value(self, tensor: str, step: int) -> np.ndarray | None:
        """The values going into the activation function, for an inputs tensor ``tensors``
        returned: the saved values, except for a layer with weights (Keras
        ``Dense(units, activation=f)``, whose saved ``inputs`` are the layer's input), where
        they are ``inputs @ kernel + bias`` from the weights saved at ``step``. None when
        they cannot be had (the weights are not saved at the step; a Keras layer that
        changes the shape without saved weights is no activation whose input was saved)."""
        layer = self._input_layer(tensor)
        if layer is None or not self.needs_weights(tensor):
            return self._value(tensor, step)
        names = self.trial.tensor_names(step=step)
        kernel, bias = self._dense_weights(layer, names, step)
        x = self._value(tensor, step)
        if kernel is None or x is None:
            return None
        return _pre_activation(x, kernel, bias)

    def needs_weights(self, tensor: str) -> bool:
        """Whether ``tensor``'s values are a layer's input, not its function's input, so
        that ``input_value`` computes the function's input from the layer's weights."""
        layer = self._input_layer(tensor)
        return layer is not None and (layer.decided_by == "weights" or layer.has_weights)

    def _input_layer(self, tensor: str) -> Layer | None:
        if _SAGEMAKER.search(tensor) or tensor in self._collected:
            return None
        for layer in self._layers.values():
            if layer.inputs == tensor:
                return layer
        return None

    def _collection_tensors(self, wanted: tuple[str, str], names: list[str]) -> set[str]:
        """The tensors among ``names`` of collections named like SageMaker's ``wanted`` one:
        their listed names and what their include_regex finds (matched once per new name)."""
        found: set[str] = set()
        for collection in self.trial.collections().values():
            kind = _collection_kind(collection.name)
            if kind != wanted:
                continue
            members = self._members.setdefault(collection.name, set(collection.tensor_names))
            fresh = [n for n in names if (collection.name, n) not in self._matched]
            if fresh and collection.include_regex:
                patterns = [
                    compile_pattern(r, what=f"include_regex of collection {collection.name!r}")
                    for r in collection.include_regex
                ]
                members.update(matching_names(fresh, patterns))
            self._matched.update((collection.name, n) for n in fresh)
            for name in members.intersection(names):
                self._collected[name] = kind[0]
                found.add(name)
        return found

    def _update(self, names: list[str]) -> None:
        new = [n for n in names if n not in self._known]
        if not new:
            return
        self._known.update(new)
        for key, found in layers_of(sorted(self._known)).items():
            layer = self._layers.setdefault(key, found)
            layer.inputs = layer.inputs or found.inputs
            layer.outputs = layer.outputs or found.outputs

    def _decide(self, layer: Layer, step: int, names: list[str]) -> None:
        """Values first (a layer named ``pre_sigmoid`` may be a linear Dense), the name when
        the values cannot tell."""
        layer.attempts += 1
        found = self._by_values(layer, step, names)
        if found is not None:
            layer.function, layer.decided_by = found
            return
        named = function_in_name(layer.module or layer.name)
        if named is not None:
            layer.function, layer.decided_by = named, "name"

    def _by_values(self, layer: Layer, step: int, names: list[str]) -> tuple[str, str] | None:
        if layer.inputs not in names or layer.outputs not in names:
            return None
        x = self._value(layer.inputs, step) if layer.inputs else None
        y = self._value(layer.outputs, step) if layer.outputs else None
        if x is None or y is None:
            return None
        kernel, bias = self._dense_weights(layer, names, step)
        if kernel is not None:  # a layer with weights: its output is f(x @ kernel + bias)
            layer.has_weights = True
            found = _dense_function(x, y, kernel, bias)
            return (found, "weights") if found else None
        if x.shape == y.shape:
            found = _matching_function(x, y, tolerance=_PAIR_TOLERANCE)
            return (found, "values") if found else None
        return None

    def _dense_weights(
        self, layer: Layer, names: list[str], step: int
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        prefix = f"{layer.module or layer.name}/weights/"
        kernels = [n for n in names if n.startswith(prefix) and n.endswith("kernel:0")]
        biases = [n for n in names if n.startswith(prefix) and n.endswith("bias:0")]
        if len(kernels) != 1:
            return None, None
        return self._value(kernels[0], step), (self._value(biases[0], step) if biases else None)

    def _value(self, name: str, step: int) -> np.ndarray | None:
        try:
            value = np.asarray(self.trial.tensor(name).value(step))
        except SMDebugError:
            return None
        return value.astype(np.float64) if value.dtype.kind in "iuf" and value.size else None


_UNSEEN: Any = object()


def _sagemaker_kind(name: str) -> tuple[str, str] | None:
    """(function, "inputs" or "outputs") of a tensor a SageMaker collection or a TF1 ReLU op
    names, None for any other name."""
    if _TF1_RELU.search(name):
        return ("relu", "outputs")
    match = _SAGEMAKER.search(name)
    return (match["fn"].lower(), match["side"] + "s") if match else None


def _matching_function(x: np.ndarray, y: np.ndarray, *, tolerance: float) -> str | None:
    """The function f (relu, tanh, sigmoid or the identity) with y == f(x): the one whose
    largest error, relative to the largest output, is below ``tolerance`` while every other
    candidate is off by more than that and by 4x as much. None when none or several fit (a
    ReLU whose inputs are all positive fits the identity too: asked again later)."""
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return None
    scale = max(float(np.max(np.abs(y))), 1e-12)
    errors = {fn: float(np.max(np.abs(f(x) - y))) / scale for fn, f in _F.items()}
    ranked = sorted(errors, key=errors.__getitem__)
    best, second = errors[ranked[0]], errors[ranked[1]]
    if best > tolerance or second <= max(tolerance, 4 * best):
        return None
    return ranked[0]


def _collection_kind(name: str) -> tuple[str, str] | None:
    """(function, side) of a collection named like SageMaker's (``relu_output``,
    ``sigmoid_inputs``), None for any other collection."""
    match = _COLLECTION.match(name)
    return (match["fn"].lower(), match["side"].lower() + "s") if match else None


def _pre_activation(
    x: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None
) -> np.ndarray | None:
    """``x @ kernel + bias`` of a Dense layer, None when the shapes do not fit one."""
    if x.ndim < 2 or kernel.ndim != 2 or x.shape[-1] != kernel.shape[0]:
        return None
    product: np.ndarray = x @ kernel
    return product + (bias if bias is not None and bias.shape == (kernel.shape[1],) else 0.0)


def _dense_function(
    x: np.ndarray, y: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None
) -> str | None:
    """The function of a Dense layer: y == f(x @ kernel + bias)."""
    pre = _pre_activation(x, kernel, bias)
    if pre is None or pre.shape != y.shape:
        return None
    return _matching_function(pre, y, tolerance=_DENSE_TOLERANCE)
