"""Which saved tensors are the inputs and outputs of ReLU, tanh and sigmoid layers.

SageMaker's default selections (``.*relu_output``, ``.*tanh_input``, ``.*sigmoid_input``) name
tensors of collections the SDK defined; smdebug's framework hooks name layer tensors otherwise
(docs/hook-naming.md):

* TensorFlow 2 Keras: ``<layer>/inputs`` and ``<layer>/outputs`` (``re_lu/outputs``,
  ``activation/inputs``, ``hidden_relu/outputs``);
* PyTorch and MXNet: ``<module>_input_<i>`` / ``<module>_output_<i>`` (``relu1_output_0``);
  the n-th call of a one-input module (a ResNet block reusing one ``nn.ReLU``) writes
  ``_input_<n>`` / ``_output_<n>``: each call is a layer of its own (``relu1[1]``);
* TensorFlow 1 graphs: op outputs such as ``dense/Relu:0`` (ReLU outputs only).

``ActivationFinder`` finds the layers and decides each one's function, once per layer:

1. by values: the function ``f`` with ``output == f(input)`` at a step where both were saved
   with one shape (a Keras ``Activation("tanh")`` is auto-named ``activation``); an all-zero
   output is a ReLU's when the input is <= 0; outputs of 1 are "tanh|sigmoid" (both
   saturate there) until another step, call or the name tells;
2. for a Keras ``Dense`` / ``Conv`` layer whose kernel is saved (checked first: a square Dense
   has one shape in and out), ``output == f(input @ kernel + bias)`` (a convolution for a
   Conv, rules_builtin/_preactivation.py); when its outputs are not
   saved, the ``f`` whose result another layer's saved inputs hold (the next layer reads it),
   and ``output_value`` computes its outputs (DeadRelu reads them);
3. another call of the same module decided by its values (a tanh module shared by two
   branches whose second call is saturated: tanh and sigmoid are both 1 there);
4. by name: the last of "relu" ("re_lu"), "tanh", "sigmoid" in the layer's name, except for
   a PyTorch / MXNet module whose input and output differ in shape (``TwoBranchTanh``, a
   model: no activation).

A layer whose function cannot be told is asked again at later steps, a few times at most.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.errors import SMDebugError
from evaluator.trial.patterns import compile_pattern, matching_names
from rules_builtin._preactivation import clear_winner, kernel_names, pre_activation

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
_SATURATED = "tanh|sigmoid"  # what the values of a layer saturated at 1 allow
_SIGMOID_BELOW_ONE = 15.0  # float32 sigmoid(x) < 1 for x below this; tanh(x) == 1 past 9.1


@dataclass
class Layer:
    """One layer's saved input and output tensor names (either may be missing); ``name``
    is its key (``relu1[1]``: 2nd call of ``relu1``), ``module`` what it was saved under."""

    name: str
    module: str = ""
    inputs: str | None = None
    outputs: str | None = None
    function: str | None = None  # "relu", "tanh", "sigmoid", "identity" or "tanh|sigmoid"
    decided_by: str | None = None  # "name", "values", "weights", "call", "shape"
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
    """The saved tensors of one function's layers, found as the module docstring says."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._layers: dict[str, Layer] = {}
        self._known: set[str] = set()
        self._kinds: dict[str, tuple[str, str] | None] = {}  # name -> _sagemaker_kind(name)
        self._collected: dict[str, str] = {}  # tensor of a SageMaker-named collection -> fn
        self._members: dict[str, set[str]] = {}  # such a collection -> its tensors seen
        self._matched: set[tuple[str, str]] = set()  # (collection, name) pairs matched
        self._computed: set[str] = set()  # inputs tensors standing in for unsaved outputs

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
                if side == "outputs" and self._computable(layer, step, names):
                    if function in str(layer.function).split("|"):  # f(x @ kernel + b)
                        self._computed.add(str(layer.inputs))
                        found.add(str(layer.inputs))
                continue
            if layer.decided_by in (None, "name") and layer.attempts < _VALUE_ATTEMPTS:
                self._decide(layer, step, names)
            if function in str(layer.function).split("|"):
                found.add(tensor)
        return sorted(found)

    def computes_output(self, tensor: str) -> bool:
        """Whether ``tensor`` (inputs) stands for unsaved outputs: read ``output_value``."""
        return tensor in self._computed

    def output_value(self, tensor: str, step: int) -> np.ndarray | None:
        """``f(inputs @ kernel + bias)`` of the layer whose inputs are ``tensor``, or None."""
        layer = self._input_layer(tensor)
        pre = self.input_value(tensor, step) if layer is not None else None
        if pre is None or layer is None or layer.function not in _F:
            return None
        return _F[layer.function](pre)

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
        """The values going into the function, for an inputs tensor ``tensors`` returned:
        as saved, except for a layer with weights (Keras ``Dense(units, activation=f)``,
        whose ``inputs`` are the layer's), where they are ``inputs @ kernel + bias`` from
        the weights saved at ``step`` (None when those are not saved there)."""
        layer = self._input_layer(tensor)
        if layer is None or not self.needs_weights(tensor):
            return self._value(tensor, step)
        names = self.trial.tensor_names(step=step)
        kernel, bias = self._dense_weights(layer, names, step)
        x = self._value(tensor, step)
        if kernel is None or x is None:
            return None
        return pre_activation(x, kernel, bias, self._shape(layer.outputs, names, step))

    def _shape(self, tensor: str | None, names: list[str], step: int) -> tuple[int, ...] | None:
        try:
            return tuple(self.trial.tensor(tensor).shape(step)) if tensor in names else None
        except SMDebugError:
            return None

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

    def _computable(self, layer: Layer, step: int, names: list[str]) -> bool:
        """Whether a layer whose outputs are not saved at ``step`` has its inputs and a kernel
        saved there (its outputs can be computed); decides its function if not yet known."""
        if layer.inputs not in names or len(self._kernels(layer, names)[0]) != 1:
            return False
        layer.has_weights = True
        if layer.decided_by in (None, "name") and layer.attempts < _VALUE_ATTEMPTS:
            self._decide(layer, step, names)
        return True

    def _decide(self, layer: Layer, step: int, names: list[str]) -> None:
        """Values first (a layer named ``pre_sigmoid`` may be a linear Dense), the name last."""
        layer.attempts += 1
        if len(self._kernels(layer, names)[0]) == 1:
            layer.has_weights = True  # its inputs feed a matmul first, outputs saved or not
        found = self._by_values(layer, step, names)
        if found is not None and found[0] == _SATURATED:
            layer.function = _SATURATED  # until another step, a sibling or the name tells
        elif found is not None:
            layer.function, layer.decided_by = found
            return
        for other in self._layers.values():  # another call of the module, told by values
            if other.module == layer.module and other.decided_by in ("values", "weights"):
                layer.function, layer.decided_by = other.function, "call"
                return
        if self._reshapes(layer, step, names):
            layer.function, layer.decided_by = None, "shape"  # no elementwise function
            return
        named = function_in_name(layer.module or layer.name)
        if named is not None:
            layer.function, layer.decided_by = named, "name"

    def _by_values(self, layer: Layer, step: int, names: list[str]) -> tuple[str, str] | None:
        if layer.inputs in names and layer.outputs not in names and layer.has_weights:
            return self._by_next_inputs(layer, step, names)
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

    def _reshapes(self, layer: Layer, step: int, names: list[str]) -> bool:
        """A PyTorch / MXNet module whose input and output differ in shape: a model named
        ``TwoBranchTanh``, no tanh (a Keras ``Dense`` named ``hidden_relu`` stays a relu)."""
        if layer.has_weights or layer.inputs not in names or layer.outputs not in names:
            return False
        if not _MODULE.match(layer.inputs or ""):
            return False
        try:
            shapes = [self.trial.tensor(n).shape(step) for n in (layer.inputs, layer.outputs)]
        except SMDebugError:
            return False
        return bool(shapes[0] != shapes[1])

    def _by_next_inputs(self, layer: Layer, step: int, names: list[str]) -> tuple[str, str] | None:
        """A Dense-like layer whose outputs are not saved: its function is the one f with
        ``f(inputs @ kernel + bias)`` equal to another layer's saved inputs (the next layer
        of a chain reads its outputs), when exactly one function matches."""
        pre = self.input_value(layer.inputs, step) if layer.inputs else None
        if pre is None:
            return None
        matches = set()
        for other in self._layers.values():
            if other is layer or other.inputs not in names or other.inputs == layer.inputs:
                continue
            y = self._value(str(other.inputs), step)
            if y is not None and y.shape == pre.shape:
                found = _matching_function(pre, y, tolerance=_DENSE_TOLERANCE)
                matches.update([found] if found else [])
        return (matches.pop(), "weights") if len(matches) == 1 else None

    def _kernels(self, layer: Layer, names: list[str]) -> tuple[list[str], list[str]]:
        return kernel_names(layer.module or layer.name, names)

    def _dense_weights(
        self, layer: Layer, names: list[str], step: int
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        kernels, biases = self._kernels(layer, names)
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
    if not np.any(y):  # all zero (a dead ReLU): relu when x is (within tolerance) <= 0
        top = float(np.max(np.abs(x)))
        return "relu" if top > 0 and float(np.max(x)) <= tolerance * top else None
    scale = max(float(np.max(np.abs(y))), 1e-12)
    errors = {fn: float(np.max(np.abs(f(x) - y))) / scale for fn, f in _F.items()}
    ranked = sorted(errors, key=errors.__getitem__)
    best, second, third = (errors[fn] for fn in ranked[:3])
    if set(ranked[:2]) == {"tanh", "sigmoid"} and second <= tolerance < third:
        # both are 1 where x is large; float32 sigmoid is 1 only past 16.6 (1 - 3e-7 at 15)
        return "tanh" if np.any((y == 1.0) & (x < _SIGMOID_BELOW_ONE)) else _SATURATED
    if best > tolerance or second <= max(tolerance, 4 * best):
        return None
    return ranked[0]


def _collection_kind(name: str) -> tuple[str, str] | None:
    """(function, side) of a collection named like SageMaker's (``relu_output``), or None."""
    match = _COLLECTION.match(name)
    return (match["fn"].lower(), match["side"].lower() + "s") if match else None


def _dense_function(
    x: np.ndarray, y: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None
) -> str | None:
    """The function of a Dense / Conv layer: y == f(x @ kernel + bias) (or its convolution)."""
    pre = pre_activation(x, kernel, bias, y.shape)
    if pre is None or pre.shape != y.shape:
        return None
    found = _matching_function(pre, y, tolerance=_DENSE_TOLERANCE)
    return found if found is not None else clear_winner(pre, y, _F)
