"""The input of a Keras inline activation computed from the layer's saved input and weights
(rules_builtin/_preactivation.py), and how the activation finder uses it."""

from __future__ import annotations

import numpy as np
import pytest

from rules_builtin._activations import _dense_function, _matching_function
from rules_builtin._preactivation import kernel_names, pre_activation


def _direct(x: np.ndarray, kernel: np.ndarray, stride: int, pad: tuple[int, int]) -> np.ndarray:
    """A channels-last 2-D convolution written out position by position."""
    xp = np.pad(x, [(0, 0), pad, pad, (0, 0)])
    k = kernel.shape[0]
    out = (xp.shape[1] - k) // stride + 1
    result = np.zeros((x.shape[0], out, out, kernel.shape[-1]))
    for i in range(out):
        for j in range(out):
            patch = xp[:, i * stride : i * stride + k, j * stride : j * stride + k]
            result[:, i, j] = np.einsum("nabc,abcf->nf", patch, kernel)
    return result


@pytest.mark.parametrize(
    ("size", "stride", "pad"),
    [(6, 1, (1, 1)), (7, 1, (0, 0)), (7, 2, (0, 0)), (6, 2, (0, 1))],
    ids=["same", "valid", "valid-stride-2", "same-stride-2"],
)
def test_conv2d_pre_activation_matches_the_convolution(
    size: int, stride: int, pad: tuple[int, int]
) -> None:
    """A Conv2D's f-input is its convolution plus the bias, with the stride and padding the
    saved output's shape implies (TF's "same" pads the extra row after)."""
    rng = np.random.default_rng(0)
    x, kernel, bias = (
        rng.normal(size=(2, size, size, 3)),
        rng.normal(size=(3, 3, 3, 4)),
        rng.normal(size=4),
    )
    want = _direct(x, kernel, stride, pad) + bias
    got = pre_activation(x, kernel, bias, want.shape)
    assert got is not None and np.allclose(got, want)


def test_conv1d_and_dense() -> None:
    """A Conv1D (3-D kernel) and a Dense on a sequence (inputs @ kernel over the last axis)."""
    rng = np.random.default_rng(1)
    x, kernel = rng.normal(size=(2, 9, 3)), rng.normal(size=(3, 3, 5))
    want = np.stack([np.einsum("nkc,kcf->nf", x[:, i : i + 3], kernel) for i in range(7)], 1)
    got = pre_activation(x, kernel, None, want.shape)
    assert got is not None and np.allclose(got, want)
    dense = rng.normal(size=(3, 4))
    assert np.allclose(pre_activation(x, dense, np.ones(4)), x @ dense + 1)  # type: ignore[arg-type]


def test_what_cannot_be_computed_is_none() -> None:
    """Without the outputs' shape, with shapes that fit no stride/padding, or past the work
    limit, a convolution's input is not computed (the rule says it cannot check)."""
    x, kernel = np.ones((2, 6, 6, 3)), np.ones((3, 3, 3, 4))
    assert pre_activation(x, kernel, None) is None
    assert pre_activation(x, kernel, None, (2, 5, 5, 4)) is None
    assert pre_activation(np.ones((512, 64, 64, 64)), np.ones((3, 3, 64, 64)), None,
                          (512, 64, 64, 64)) is None  # fmt: skip
    assert pre_activation(np.ones((2, 5)), np.ones((4, 3)), None) is None


def test_kernel_names_under_fit_and_gradient_tape() -> None:
    """model.fit saves ``<layer>/weights/<layer>/kernel:0``; a GradientTape loop
    ``weights/<layer>/kernel:0``; another layer's weights are not this layer's."""
    names = ["dense/weights/dense/kernel:0", "dense/weights/dense/bias:0",
             "weights/conv2d/kernel:0", "weights/conv2d/bias:0", "weights/conv2d_1/kernel:0"]  # fmt: skip
    assert kernel_names("dense", names) == (names[:1], names[1:2])
    assert kernel_names("conv2d", names) == (names[2:3], names[3:4])


def test_a_saturated_tanh_is_told_from_a_sigmoid_by_float32_ones() -> None:
    """Outputs of exactly 1.0 where the input is 14 are a tanh's (float32 sigmoid(14) is
    below 1); where every input is past 17 both functions give 1: either."""
    x = np.full((4, 3), 14.0)
    assert _matching_function(x, np.ones((4, 3), dtype=np.float32), tolerance=0.1) == "tanh"
    x = np.full((4, 3), 40.0)
    assert _matching_function(x, np.ones((4, 3)), tolerance=0.1) == "tanh|sigmoid"


def test_weights_one_update_late_still_tell_the_function() -> None:
    """model.fit saves a step's weights after its update: with each weight moved by 0.01
    (Adam's first step) along the batch's gradient, tanh(x @ kernel + bias) is off by up to 0.3 at the
    largest error, yet the median error names tanh; relu and the identity on mostly
    positive inputs stay undecided."""
    rng = np.random.default_rng(2)
    x, kernel = rng.normal(size=(16, 36)), rng.normal(size=(36, 16)) * 0.25
    y = np.tanh(x @ kernel)
    late = kernel - 0.01 * np.sign(x.T @ rng.normal(size=(16, 16)))  # sign(gradient) steps
    assert np.max(np.abs(np.tanh(x @ late) - y)) > 0.1  # the strict comparison fails
    assert _dense_function(x, y, late, None) == "tanh"
    positive = np.abs(rng.normal(size=(16, 4))) + 0.1
    assert _dense_function(positive, positive @ np.eye(4), np.eye(4), None) is None
