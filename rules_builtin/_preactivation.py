"""The input of a Keras layer's inline activation (``Dense(units, activation=f)``,
``Conv1D`` / ``Conv2D(..., activation=f)``), computed from the layer's saved input and weights:
the hook saves the layer's input and ``f``'s output, never ``f``'s input (docs/hook-naming.md).

* Dense: ``inputs @ kernel + bias`` (a 2-D kernel; inputs of any rank, last axis features);
* Conv1D / Conv2D, channels last: the convolution of ``inputs`` with the ``(*k, in, out)``
  kernel plus the bias. The stride and padding ("same" or "valid") are not saved: they are the
  ones that give the saved outputs' shape (dilation 1). Without the outputs' shape, or past
  ``WORK_LIMIT`` multiply-adds, the input is not computed (the caller says it cannot check).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["STALE_TOLERANCE", "WORK_LIMIT", "clear_winner", "kernel_names", "pre_activation"]

WORK_LIMIT = 200_000_000  # multiply-adds per computation (a 32x56x56x64 -> 64 3x3 conv: 2e9)
# model.fit saves a step's weights after its update, its layer values before: f(pre) recomputed
# from them is off by one update (Adam lr 0.01, 36 inputs: up to 0.3 of tanh's 1) at the
# largest error, much less at the median
STALE_TOLERANCE = 0.05


def clear_winner(
    pre: np.ndarray, y: np.ndarray, functions: dict[str, Callable[[np.ndarray], np.ndarray]]
) -> str | None:
    """The function f whose median error |f(pre) - y| (relative to the largest |y|) is below
    STALE_TOLERANCE and 5x below every other's; None when none or several fit, or when the
    values are all zero or not finite."""
    if not (np.isfinite(pre).all() and np.isfinite(y).all() and np.any(y)):
        return None
    scale = float(np.max(np.abs(y)))
    errors = {fn: float(np.median(np.abs(f(pre) - y))) / scale for fn, f in functions.items()}
    ranked = sorted(errors, key=errors.__getitem__)
    best, second = errors[ranked[0]], errors[ranked[1]]
    return (
        ranked[0] if best <= STALE_TOLERANCE and second > max(5 * best, STALE_TOLERANCE) else None
    )


def kernel_names(layer: str, names: list[str]) -> tuple[list[str], list[str]]:
    """A Keras layer's saved kernel and bias names: ``<layer>/weights/<variable>`` under
    model.fit, ``weights/<layer>/<variable>`` in a GradientTape loop (docs/hook-naming.md)."""
    ours = [n for n in names if n.startswith((f"{layer}/weights/", f"weights/{layer}/"))]
    return [n for n in ours if n.endswith("kernel:0")], [n for n in ours if n.endswith("bias:0")]


def pre_activation(
    x: np.ndarray,
    kernel: np.ndarray,
    bias: np.ndarray | None,
    out_shape: tuple[int, ...] | None = None,
) -> np.ndarray | None:
    """``f``'s input for a layer with ``kernel`` fed ``x`` (None when they do not fit)."""
    if kernel.ndim == 2:
        if x.ndim < 2 or x.shape[-1] != kernel.shape[0]:
            return None
        product: np.ndarray = x @ kernel
    elif kernel.ndim in (3, 4) and out_shape is not None:
        found = _convolve(x, kernel, tuple(out_shape))
        if found is None:
            return None
        product = found
    else:
        return None
    return product + (bias if bias is not None and bias.shape == (kernel.shape[-1],) else 0.0)


def _geometry(size: int, k: int, out: int) -> tuple[int, int, int] | None:
    """(stride, pad before, pad after) giving ``out`` from ``size`` with kernel ``k``: "same"
    first (TF pads the extra row after), then "valid"."""
    for stride in range(1, max(k, 4) + 1):
        if -(-size // stride) == out:
            total = max((out - 1) * stride + k - size, 0)
            return stride, total // 2, total - total // 2
        if size >= k and (size - k) // stride + 1 == out:
            return stride, 0, 0
    return None


def _convolve(x: np.ndarray, kernel: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray | None:
    nd = kernel.ndim - 2
    ks, channels, filters = kernel.shape[:nd], kernel.shape[-2], kernel.shape[-1]
    if x.ndim != nd + 2 or len(out_shape) != nd + 2 or x.shape[-1] != channels:
        return None
    if out_shape[0] != x.shape[0] or out_shape[-1] != filters:
        return None
    outs = out_shape[1:-1]
    if x.shape[0] * math.prod(outs) * math.prod(ks) * channels * filters > WORK_LIMIT:
        return None
    geometry = [_geometry(s, k, o) for s, k, o in zip(x.shape[1:-1], ks, outs)]
    if any(g is None for g in geometry):
        return None
    pads = [(0, 0)] + [(g[1], g[2]) for g in geometry if g] + [(0, 0)]
    windows = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, pads), ks, axis=tuple(range(1, nd + 1))
    )  # (N, *positions, C, *ks)
    index = (slice(None),) + tuple(slice(None, o * g[0], g[0]) for o, g in zip(outs, geometry) if g)
    windows = windows[index]
    if tuple(windows.shape[1 : nd + 1]) != tuple(outs):
        return None
    order = (0, *range(1, nd + 1), *range(nd + 2, 2 * nd + 2), nd + 1)  # (N, *pos, *ks, C)
    flat = windows.transpose(order).reshape(-1, math.prod(ks) * channels)
    result: np.ndarray = (flat @ kernel.reshape(-1, filters)).reshape(out_shape)
    return result
