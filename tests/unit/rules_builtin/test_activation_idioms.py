"""Activation rules on idioms real hooks write: a module called more than once, Keras Dense
layers with an inline activation, and collections the user named like SageMaker's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from rules_builtin._activations import ActivationFinder, layers_of
from rules_builtin.dead_relu import DeadRelu
from rules_builtin.poor_weight_initialization import PoorWeightInitialization
from rules_builtin.saturated_activation import SaturatedActivation

RNG = np.random.default_rng(11)
X = RNG.normal(size=(64, 16)).astype(np.float32)
SATURATING = (np.sign(X) * (np.abs(X) + 1.0) * 30.0).astype(np.float32)  # every |value| >= 30


def _fired(rule: Any) -> list[int]:
    return list(invoke_rule(rule, raise_eval_cond=False).fired_steps)


def test_each_call_of_a_module_is_a_layer_of_its_own() -> None:
    """relu1_input_1 pairs with relu1_output_1: the second call is a layer named relu1[1]."""
    layers = layers_of(
        ["relu1_input_0", "relu1_output_0", "relu1_input_1", "relu1_output_1", "fc_output_0"]
    )
    assert layers["relu1[1]"].inputs == "relu1_input_1"
    assert layers["relu1[1]"].outputs == "relu1_output_1"
    assert layers["relu1[1]"].module == "relu1"
    assert layers["relu1"].outputs == "relu1_output_0"


def test_a_dead_second_call_of_a_shared_relu_fires(make_trial: Callable[..., Any]) -> None:
    """A ResNet block reusing one nn.ReLU: the call whose inputs are all negative is dead."""
    negative = -np.abs(X) - 0.1
    trial = make_trial(
        {
            step: {
                "relu_input_0": X,
                "relu_output_0": np.maximum(X, 0),
                "relu_input_1": negative,
                "relu_output_1": np.maximum(negative, 0),
            }
            for step in range(3)
        }
    )
    finder = ActivationFinder(trial)
    assert finder.tensors("relu", "outputs", 0) == ["relu_output_0", "relu_output_1"]
    rule = DeadRelu(trial)
    assert _fired(rule) == [0, 1, 2]
    assert {t for check in rule.evidence.firings_at(0) for t in check.tensors} == {"relu_output_1"}


def test_a_saturated_second_call_of_a_shared_tanh_fires(make_trial: Callable[..., Any]) -> None:
    """One tanh module shared by two branches: the branch whose inputs are huge saturates."""
    huge = SATURATING
    trial = make_trial(
        {
            0: {
                "tanh_input_0": X,
                "tanh_output_0": np.tanh(X),
                "tanh_input_1": huge,
                "tanh_output_1": np.tanh(huge),
            }
        }
    )
    assert _fired(SaturatedActivation(trial)) == [0]


def _dense_tanh(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "dense/inputs": x,
        "dense/outputs": np.tanh(x @ kernel + bias),
        "dense/weights/dense/kernel:0": kernel,
        "dense/weights/dense/bias:0": bias,
    }


def test_large_inputs_to_a_healthy_dense_tanh_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Dense(activation='tanh') fed large values through a small kernel: the tanh's input,
    x @ kernel + bias, is moderate, so nothing is saturated (its saved inputs are not it)."""
    x = (X * 50.0).astype(np.float32)
    kernel = (RNG.normal(size=(16, 8)) * 0.005).astype(np.float32)
    bias = np.zeros(8, np.float32)
    trial = make_trial({0: _dense_tanh(x, kernel, bias)})
    finder = ActivationFinder(trial)
    assert finder.tensors("tanh", "inputs", 0) == ["dense/inputs"]
    assert finder.needs_weights("dense/inputs")
    assert _fired(SaturatedActivation(trial)) == []


def test_a_saturated_dense_tanh_with_small_inputs_fires(make_trial: Callable[..., Any]) -> None:
    """Small inputs through a huge kernel saturate the tanh: found through the weights."""
    x = (X * 0.5).astype(np.float32)
    kernel = (RNG.normal(size=(16, 8)) * 5000.0).astype(np.float32)
    bias = np.zeros(8, np.float32)
    trial = make_trial({0: _dense_tanh(x, kernel, bias)})
    pre = ActivationFinder(trial)
    pre.tensors("tanh", "inputs", 0)
    computed = pre.input_value("dense/inputs", 0)
    assert computed is not None
    np.testing.assert_allclose(computed, x @ kernel + bias, rtol=1e-5, atol=1e-3)
    assert _fired(SaturatedActivation(trial)) == [0]


def test_poor_initialization_reads_dense_relu_pre_activations(
    make_trial: Callable[..., Any],
) -> None:
    """Two Dense(activation='relu') layers with equal inputs but kernels 100x apart: the
    variances of their pre-activations differ ~10,000x, those of their saved inputs not."""
    steps = {}
    small = (RNG.normal(size=(16, 16)) * 0.01).astype(np.float32)
    large = (RNG.normal(size=(16, 16)) * 1.0).astype(np.float32)
    bias = np.zeros(16, np.float32)
    for step in range(3):
        layer = {}
        for name, kernel in (("d1", small), ("d2", large)):
            layer[f"{name}/inputs"] = X
            layer[f"{name}/outputs"] = np.maximum(X @ kernel + bias, 0)
            layer[f"{name}/weights/{name}/kernel:0"] = kernel
            layer[f"{name}/weights/{name}/bias:0"] = bias
        steps[step] = layer
    trial = make_trial(steps)
    rule = PoorWeightInitialization(trial)
    assert _fired(rule)[:1] == [0]
    ratios = [c.value for c in rule.evidence.firings_at(0) if "variance" in c.quantity]
    assert ratios and ratios[0] > 1000


def test_a_user_collection_named_like_sagemakers_is_used(make_trial: Callable[..., Any]) -> None:
    """CollectionConfig('sigmoid_input') with the user's regex: its tensors are sigmoid inputs,
    whatever they are called."""
    saturated = SATURATING
    collection = Collection("sigmoid_input", include_regex=["head_log"])
    trial = make_trial({0: {"head_logits": saturated, "other": X}}, collections=[collection])
    finder = ActivationFinder(trial)
    assert finder.tensors("sigmoid", "inputs", 0) == ["head_logits"]
    assert finder.function_of("head_logits") == "sigmoid"
    assert _fired(SaturatedActivation(trial)) == [0]


def _dense_relu_without_outputs(kernel: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    """A Keras Dense(activation='relu') whose outputs are not saved (its inputs, kernel and
    bias are), followed by a layer ``logits`` whose saved inputs are the Dense's outputs."""
    outputs = np.maximum(X @ kernel + bias, 0).astype(np.float32)
    return {
        "dense/inputs": X,
        "dense/weights/dense/kernel:0": kernel,
        "dense/weights/dense/bias:0": bias,
        "logits/inputs": outputs,
        "logits/outputs": outputs @ np.ones((8, 3), np.float32),
        "logits/weights/logits/kernel:0": np.ones((8, 3), np.float32),
    }


def test_a_dead_dense_relu_whose_outputs_are_not_saved_fires(
    make_trial: Callable[..., Any],
) -> None:
    """Dense(activation='relu') with bias -50 (100 % dead), outputs not saved, kernel and bias
    saved: its function is read from the next layer's inputs and its outputs computed."""
    kernel = (RNG.normal(size=(16, 8)) * 0.1).astype(np.float32)
    bias = np.full(8, -50.0, np.float32)
    trial = make_trial({step: _dense_relu_without_outputs(kernel, bias) for step in range(2)})
    rule = DeadRelu(trial)
    assert _fired(rule) == [0, 1]
    (check,) = rule.evidence.firings_at(0)
    assert check.tensors == ("dense/inputs",) and "kernel" in check.quantity


def test_a_live_dense_relu_whose_outputs_are_not_saved_is_checked_and_quiet(
    make_trial: Callable[..., Any],
) -> None:
    """The same layer with a zero bias: checked (not 'nothing checked'), and quiet."""
    kernel = (RNG.normal(size=(16, 8)) * 0.5).astype(np.float32)
    trial = make_trial({0: _dense_relu_without_outputs(kernel, np.zeros(8, np.float32))})
    rule = DeadRelu(trial)
    assert _fired(rule) == []
    assert rule.evidence.comparisons == 1


def test_a_dead_dense_relu_named_for_its_function_without_a_next_layer_fires(
    make_trial: Callable[..., Any],
) -> None:
    """Only the inputs, kernel and bias of a Dense named hidden_relu are saved: its name says
    relu, and relu(inputs @ kernel + bias) is all zero."""
    kernel = (RNG.normal(size=(16, 8)) * 0.1).astype(np.float32)
    steps = {
        0: {
            "hidden_relu/inputs": X,
            "hidden_relu/weights/hidden_relu/kernel:0": kernel,
            "hidden_relu/weights/hidden_relu/bias:0": np.full(8, -50.0, np.float32),
        }
    }
    assert _fired(DeadRelu(make_trial(steps))) == [0]


def test_all_zero_saved_outputs_of_a_dense_relu_are_a_relu(make_trial: Callable[..., Any]) -> None:
    """A Dense whose saved outputs are all zero while the saved weights (already updated by
    the batch) give slightly positive pre-activations for a few samples is still a relu."""
    kernel = (RNG.normal(size=(16, 8)) * 0.1).astype(np.float32)
    bias = np.full(8, -2.0, np.float32)
    pre = X @ kernel + bias
    nudged = bias + (0.02 - pre.max(axis=0)).astype(np.float32)  # max pre-activation 0.02
    step = {
        "dense/inputs": X,
        "dense/outputs": np.zeros((64, 8), np.float32),
        "dense/weights/dense/kernel:0": kernel,
        "dense/weights/dense/bias:0": nudged,
    }
    assert _fired(DeadRelu(make_trial({0: step}))) == [0]
