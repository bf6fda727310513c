"""Reductions computed from a raw tensor, as ``Tensor.reduction_value`` returns them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.errors import SMDebugValueError

__all__ = ["ALLOWED_NORMS", "ALLOWED_REDUCTIONS", "compute_reduction"]

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")

_FUNCTIONS: dict[str, Callable[[Any], np.generic]] = {
    "min": np.amin,
    "max": np.amax,
    "mean": np.mean,
    "std": np.std,  # ddof=0, as smdebug
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
}


def compute_reduction(value: np.ndarray, reduction_name: str, abs: bool = False) -> np.generic:
    """One reduction of ``value``; ``abs`` applies ``np.absolute`` first.

    ``l1``/``l2`` are norms of the flattened tensor, whatever its rank: the norms the framework
    hooks save. smdebug computes matrix norms for 2-D tensors and fails for 3-D and more
    (docs/compatibility.md).
    """
    if reduction_name not in _FUNCTIONS and reduction_name not in ALLOWED_NORMS:
        raise SMDebugValueError(f"Invalid reduction type {reduction_name}")
    x = np.absolute(value) if abs else value
    if reduction_name in ALLOWED_NORMS:
        flat = np.ravel(x)
        return np.linalg.norm(flat, ord=1 if reduction_name == "l1" else 2)
    return _FUNCTIONS[reduction_name](x)
