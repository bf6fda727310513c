"""Comparing our answers with smdebug's golden answers (tests/compat/golden.py probes both):
``diff`` walks two answer trees to the leaves that differ, ``same_within_ulps`` accepts computed
float reductions a few units in the last place apart, and ``explain`` names the deliberate fix
of docs/compatibility.md that accounts for a difference, after checking our answer with an
independent computation (None when no documented fix explains it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from tests.compat.golden import encode_array

__all__ = ["diff", "explain", "same_within_ulps"]


def diff(
    golden: Any, ours: Any, path: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """Leaves where ``ours`` differs from ``golden`` (encoded arrays and errors are leaves)."""
    is_leaf = not isinstance(golden, dict) or "error" in golden or "sha256" in golden
    if is_leaf or not isinstance(ours, dict):
        if golden != ours:
            yield path, golden, ours
        return
    for key in golden.keys() | ours.keys():
        if key not in ours or key not in golden:
            yield path + (key,), golden.get(key, "<absent>"), ours.get(key, "<absent>")
        else:
            yield from diff(golden[key], ours[key], path + (key,))


def same_within_ulps(golden: Any, ours: Any, ulps: int = 4) -> bool:
    """Computed float reductions (l2 is ``sqrt(x.dot(x))`` through BLAS) may differ in the last
    bits between numpy/BLAS builds; smdebug's answers came from numpy 1.26. Equal dtype and shape,
    values within a few units in the last place."""
    if not (
        isinstance(golden, dict)
        and isinstance(ours, dict)
        and "values" in golden
        and "values" in ours
    ):
        return False
    if golden["dtype"] != ours["dtype"] or golden["shape"] != ours["shape"]:
        return False
    dtype = np.dtype(golden["dtype"])
    if dtype.kind != "f":
        return False
    g = np.array(golden["values"], dtype=np.float64)
    o = np.array(ours["values"], dtype=np.float64)
    return bool(np.allclose(g, o, rtol=ulps * np.finfo(dtype).eps, atol=0))


def explain(trial: Any, path: tuple[Any, ...], golden: Any, ours: Any) -> str | None:
    """The fix in docs/compatibility.md that accounts for this difference, after checking our
    answer independently; None when no documented fix explains it."""
    if len(path) < 3 or path[0] != "tensors":
        return None
    tname, field = path[1], path[2]
    tensor = trial.tensor(tname)
    if field in ("values", "values_by_mode"):
        step = int(path[-2]) if field == "values" else int(path[-1])
        mode = ModeKeys.GLOBAL if field == "values" else ModeKeys[path[3]]
        worker = path[-1] if field == "values" and path[-1] != "_default" else None
        return _explain_value(tensor, step, mode, worker, golden, ours)
    if field == "shapes" and golden == {"error": "KeyError"}:
        value = tensor.value(int(path[3]))
        return (
            "all-numpy-dtypes-decode"
            if ours == list(value.shape) and value.dtype == np.int16
            else None
        )
    if field == "reduction_values":
        return _explain_reduction(tensor, int(path[3]), path[4], golden, ours)
    if (
        field == "errors"
        and path[3] == "reduction_bad_name"
        and ours == {"error": "SMDebugValueError"}
    ):
        # With the raw value readable, the bad reduction name itself is what gets reported.
        if golden == {"error": "KeyError"}:
            return "all-numpy-dtypes-decode"
        if golden == {"error": "TensorUnavailableForStep"} and _has_value(tensor):
            return "shape-does-not-hide-value"
    return None


def _has_value(tensor: Any) -> bool:
    """Whether the tensor's first step has a readable value."""
    try:
        tensor.value(tensor.steps()[0])
    except Exception:
        return False
    return True


def _explain_value(
    tensor: Any, step: int, mode: ModeKeys, worker: str | None, golden: Any, ours: Any
) -> str | None:
    """The fix behind a differing value, checked against the saved bytes or shape."""
    if golden.get("dtype") == "|u1" and ours.get("dtype") == "|i1":
        same_bytes = golden["sha256"] == ours["sha256"] and golden["shape"] == ours["shape"]
        as_int8 = [v - 256 if v > 127 else v for v in golden.get("values", [])]
        return "int8-stays-int8" if same_bytes and as_int8 == ours.get("values", []) else None
    if golden == {"error": "KeyError"} and ours.get("dtype") == "<i2":
        return "all-numpy-dtypes-decode"
    if golden == {"error": "TensorUnavailableForStep"} and "sha256" in ours:
        # smdebug lost the value because the same index file also held the shape.
        saved_shape = list(tensor.shape(step, mode=mode, worker=worker))
        return "shape-does-not-hide-value" if saved_shape == ours["shape"] else None
    return None


def _explain_reduction(tensor: Any, step: int, key: str, golden: Any, ours: Any) -> str | None:
    """The fix behind a differing reduction, checked against numpy's over the raw value."""
    name, _, kind = key.partition("|")
    try:
        value = tensor.value(step)
    except Exception:
        return None
    x = np.absolute(value) if kind == "abs" else value
    if name in ("l1", "l2"):
        expected = np.linalg.norm(np.ravel(x), ord=1 if name == "l1" else 2)
    else:
        fn = {
            "min": np.amin,
            "max": np.amax,
            "mean": np.mean,
            "std": np.std,
            "variance": np.var,
            "sum": np.sum,
            "prod": np.prod,
        }[name]
        expected = fn(x)
    if encode_array(expected) != ours:
        return None
    if value.dtype == np.int8:
        return "int8-stays-int8"
    if value.dtype == np.int16:
        return "all-numpy-dtypes-decode"
    if golden == {"error": "TensorUnavailableForStep"}:
        return "shape-does-not-hide-value"
    if name in ("l1", "l2") and value.ndim != 1:
        return "norms-of-flattened-tensor"
    return None
