"""Charting what a rule reads (a rule that records no comparisons, such as a user's rule
written for smdebug): each tensor value read becomes a point of a series of its own
(``Evidence.watch_reads`` / ``chart_reads``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys

__all__ = ["chart_read"]


def chart_read(
    trial: Any, name: str, step: int, mode: ModeKeys | None, record: Callable[..., None]
) -> None:
    """Give ``record`` (``Evidence.record``) the value of tensor ``name`` at global ``step``:
    a scalar as ``value``, an array as ``mean |value|``; a tensor saved as reductions only,
    each reduction. Raises what reading the tensor raises."""
    tensor = trial.tensor(name)
    try:
        value = np.asarray(tensor.value(step), dtype=np.float64)
    except Exception:
        for (reduction, absolute), saved in tensor.reduction_values(step).items():
            label = f"{'abs ' if absolute else ''}{reduction}"
            record(step, name, quantity=label, value=float(saved), mode=mode)
        return
    if value.size == 1:
        record(step, name, quantity="value", value=float(value.ravel()[0]), mode=mode)
    elif value.size:
        mean = float(np.abs(value).mean())
        record(step, name, quantity="mean |value|", value=mean, mode=mode)
