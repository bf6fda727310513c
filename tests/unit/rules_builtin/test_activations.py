"""Finding ReLU / tanh / sigmoid layer tensors by name and by value, whatever the framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rules_builtin._activations import ActivationFinder, function_in_name, layers_of

RNG = np.random.default_rng(3)
X = RNG.normal(scale=3.0, size=(16, 8)).astype(np.float32)


def test_function_in_name_takes_the_last_one() -> None:
    """re_lu counts as relu; the innermost (last) function named wins."""
    assert function_in_name("re_lu_1") == "relu"
    assert function_in_name("tanh_block/sigmoid") == "sigmoid"
    assert function_in_name("dense_3") is None


def test_layers_of_pairs_keras_and_module_names() -> None:
    """Keras <layer>/inputs|outputs and PyTorch <module>_input_0|_output_0 pair up."""
    layers = layers_of(
        [
            "re_lu/inputs",
            "re_lu/outputs",
            "Net_relu1_input_0",
            "Net_relu1_output_0",
            "Net_relu1_output_1",
            "loss",
        ]
    )
    assert (layers["re_lu"].inputs, layers["re_lu"].outputs) == ("re_lu/inputs", "re_lu/outputs")
    assert layers["Net_relu1"].outputs == "Net_relu1_output_0"
    assert "loss" not in layers


def test_unnamed_activation_layers_are_told_by_their_values(make_trial: Callable[..., Any]) -> None:
    """Keras auto-names Activation("tanh") 'activation': its values say it is a tanh."""
    trial = make_trial(
        {
            0: {
                "activation/inputs": X,
                "activation/outputs": np.tanh(X),
                "activation_1/inputs": X,
                "activation_1/outputs": np.maximum(X, 0),
                "activation_2/inputs": X,
                "activation_2/outputs": 1 / (1 + np.exp(-X)),
            }
        }
    )
    finder = ActivationFinder(trial)
    assert finder.tensors("tanh", "inputs", 0) == ["activation/inputs"]
    assert finder.tensors("relu", "outputs", 0) == ["activation_1/outputs"]
    assert finder.tensors("sigmoid", "inputs", 0) == ["activation_2/inputs"]
    assert finder.function_of("activation/inputs") == "tanh"


def test_values_beat_a_misleading_name(make_trial: Callable[..., Any]) -> None:
    """A linear Dense named pre_sigmoid is no sigmoid: its kernel and bias say so."""
    kernel = RNG.normal(size=(8, 4)).astype(np.float32)
    bias = RNG.normal(size=4).astype(np.float32)
    trial = make_trial(
        {
            0: {
                "pre_sigmoid/inputs": X,
                "pre_sigmoid/outputs": X @ kernel + bias,
                "pre_sigmoid/weights/pre_sigmoid/kernel:0": kernel,
                "pre_sigmoid/weights/pre_sigmoid/bias:0": bias,
            }
        }
    )
    assert ActivationFinder(trial).tensors("sigmoid", "inputs", 0) == []


def test_dense_with_relu_activation_is_found_through_its_weights(
    make_trial: Callable[..., Any],
) -> None:
    """Dense(activation='relu') named dense_3: output == relu(x @ kernel + bias)."""
    kernel = RNG.normal(size=(8, 4)).astype(np.float32)
    bias = np.zeros(4, np.float32)
    trial = make_trial(
        {
            0: {
                "dense_3/inputs": X,
                "dense_3/outputs": np.maximum(X @ kernel, 0),
                "dense_3/weights/dense_3/kernel:0": kernel,
                "dense_3/weights/dense_3/bias:0": bias,
            }
        }
    )
    assert ActivationFinder(trial).tensors("relu", "outputs", 0) == ["dense_3/outputs"]


def test_sagemaker_collection_names_are_kept(make_trial: Callable[..., Any]) -> None:
    """Tensors named like SageMaker's relu_output / tanh_input collections are selected."""
    trial = make_trial({0: {"dense0_relu_output": X, "layer_tanh_input": X}})
    finder = ActivationFinder(trial)
    assert finder.tensors("relu", "outputs", 0) == ["dense0_relu_output"]
    assert finder.tensors("tanh", "inputs", 0) == ["layer_tanh_input"]


def test_undecidable_layer_falls_back_to_its_name(make_trial: Callable[..., Any]) -> None:
    """All-positive inputs fit both relu and the identity: the name relu1 decides."""
    positive = np.abs(X) + 0.1
    trial = make_trial({0: {"relu1_input_0": positive, "relu1_output_0": positive}})
    assert ActivationFinder(trial).tensors("relu", "outputs", 0) == ["relu1_output_0"]


def test_tensorflow_1_relu_ops_are_relu_outputs(make_trial: Callable[..., Any]) -> None:
    """A TF1 graph's dense/Relu:0 and Relu_1:0 are ReLU outputs; a MatMul output is not."""
    trial = make_trial({0: {"dense/Relu:0": X, "dense_1/Relu_1:0": X, "dense/MatMul:0": X}})
    assert ActivationFinder(trial).tensors("relu", "outputs", 0) == [
        "dense/Relu:0",
        "dense_1/Relu_1:0",
    ]


def test_mxnet_activation_blocks_are_found_by_name(make_trial: Callable[..., Any]) -> None:
    """MXNet Gluon's auto-named relu0 block: relu0_output_0 is a ReLU output."""
    trial = make_trial({0: {"relu0_output_0": np.maximum(X, 0)}})
    assert ActivationFinder(trial).tensors("relu", "outputs", 0) == ["relu0_output_0"]
