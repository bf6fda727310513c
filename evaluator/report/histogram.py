"""The distribution behind a firing: a histogram of the values of the tensor that fired, at
the step it fired, read from the trial when the report's data file is written (once per rule:
kept in the data file after that). What a dead, saturated or vanishing layer looks like. A
TensorBoard histogram is drawn from its own logged buckets (the values are not in the log)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["firing_histogram"]

MAX_BINS = 40
MIN_VALUES = 16  # fewer values make no distribution worth drawing


def firing_histogram(trial: Any, reasons: Any) -> dict[str, Any] | None:
    """``{"tensor", "step", "edges", "counts", "nonfinite", "size"}`` for the first firing
    reason naming one tensor whose value at that (global) step has ``MIN_VALUES`` or more;
    None otherwise, or when it cannot be read (never raises)."""
    if trial is None or not isinstance(reasons, list):
        return None
    for reason in reasons:
        if not isinstance(reason, Mapping) or len(reason.get("tensors") or []) != 1:
            continue
        # read at the trial's step, shown at the writer's (``global_step``: where they differ)
        name, step = reason["tensors"][0], reason.get("global_step", reason.get("step"))
        if not isinstance(step, int):
            continue
        logged = _logged_histogram(trial, name, step)
        if logged is not None:
            return {**logged, "step": reason.get("step")}
        try:
            value = np.asarray(trial.tensor(name).value(step), dtype=np.float64).ravel()
        except Exception:  # a help only: a reduction-only tensor, a step gone...
            continue
        if value.size < MIN_VALUES:
            continue
        finite = value[np.isfinite(value)]
        edges: list[float] = []
        counts: list[int] = []
        if finite.size:
            bins = max(5, min(MAX_BINS, int(math.sqrt(finite.size))))
            found, bounds = np.histogram(finite, bins=bins)
            counts = [int(c) for c in found]
            edges = [float(f"{e:.6g}") for e in bounds]
        return {
            "tensor": name,
            "step": reason.get("step"),
            "edges": edges,
            "counts": counts,
            "nonfinite": int(value.size - finite.size),
            "low": float(finite.min()) if finite.size else None,
            "high": float(finite.max()) if finite.size else None,
            "size": int(value.size),
        }
    return None


def _logged_histogram(trial: Any, name: str, step: int) -> dict[str, Any] | None:
    """The firing histogram of a TensorBoard histogram tensor, from its logged buckets (edges
    clamped to the exact min and max); None for any other tensor."""
    read = getattr(trial.tensor(name), "histogram", None) if trial.has_tensor(name) else None
    if read is None:
        return None
    try:
        logged = read(step)
    except Exception:  # not a histogram at that step: the values are read instead
        return None
    buckets = np.asarray(logged.buckets, dtype=np.float64).reshape(-1, 3)
    full = np.flatnonzero(buckets[:, 2] > 0)
    if not len(full):
        return None
    buckets = buckets[full[0] : full[-1] + 1]  # the empty tails carry no information
    edges = [float(buckets[0, 0]), *(float(r) for r in buckets[:, 1])]
    edges[0] = max(edges[0], float(logged.min))
    edges[-1] = min(edges[-1], float(logged.max))
    return {
        "tensor": name,
        "step": step,
        "edges": [float(f"{e:.6g}") for e in edges],
        "counts": [int(round(c)) for c in buckets[:, 2]],
        "nonfinite": 0,
        "low": float(logged.min),
        "high": float(logged.max),
        "size": int(round(logged.count)),
    }
