"""The chart figures of one step's reads (``evaluator.rules.read_charts`` computes them at
each step it keeps, in the rule's thread): a scalar as ``value``, an array as ``mean |value|``,
a reduction the rule read as itself.

A rule reads alike tensors at a step (every gradient, every weight), so alike arrays are
copied side by side into one block and reduced in one numpy call; that block, and the slice
through which an array too large for it is summed, are kept from one step to the next
(``Scratch``). A step's figures are a few lists (``StepFigures``), not an object per figure.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

__all__ = ["MEAN_ABS", "STACK_BYTES", "Figure", "Scratch", "StepFigures", "figures", "mean_abs"]

STACK_BYTES = 1024 * 1024  # alike arrays copied side by side for their figures, at most
_SLICE_BYTES = 64 * 1024  # larger: an array's |x| is summed this much at a time
_FLOAT64 = np.dtype(np.float64)
_SUM_DTYPE = {2: np.dtype(np.float32), 4: np.dtype(np.float32)}  # by a float's size
MEAN_ABS = "mean |value|"

Figure = tuple[str, str, float]  # tensor, quantity, value


class Scratch:
    """Buffers the figures are computed in, kept from one step to the next (one per dtype, of
    at most ``STACK_BYTES``). A new block per sampled step comes, on a heap the rule's own
    arrays churn, from fresh pages more often than not, and each page costs a fault: on the
    bench's VM a 50 KB block allocated while earlier arrays are still held took 118 µs,
    against 7 µs when the block before it was freed."""

    def __init__(self) -> None:
        self._buffers: dict[np.dtype[Any], np.ndarray] = {}

    def get(self, dtype: np.dtype[Any], size: int) -> np.ndarray:
        """A flat array of ``size`` elements of ``dtype`` (its contents left as they were)."""
        held = self._buffers.get(dtype)
        if held is not None and held.size >= size:
            return held[:size]
        fresh = np.empty(size, dtype)
        if fresh.nbytes <= STACK_BYTES:
            self._buffers[dtype] = fresh
        return fresh


class StepFigures(NamedTuple):
    """The chart figures of one step: ``values[i]`` is ``names[i]``'s figure, of quantity
    ``quantities`` (one for all) or ``quantities[i]``. A few lists, not a tuple per figure:
    a rule keeps hundreds of steps' figures, and every object they hold weighs on the
    cyclic garbage collector's passes over the rule's process."""

    names: list[str]
    quantities: str | list[str]
    values: list[float]

    def rows(self) -> Iterator[Figure]:
        """Each figure as (tensor, quantity, value)."""
        quantities = self.quantities
        each = repeat(quantities) if isinstance(quantities, str) else quantities
        return zip(self.names, each, self.values)


def figures(
    names: list[str], values: list[Any], *, unique: bool = False, scratch: Scratch | None = None
) -> StepFigures:
    """The chart figures of one step's reads (``names[i]`` read as ``values[i]``; ``unique``:
    no name is there twice): a scalar as ``value``, an array as ``mean |value|`` (alike
    arrays in one numpy call: a rule reads alike tensors at a step), reductions (a dict) as
    ``[abs ]<reduction>``; what is neither is left out, and a tensor read twice is charted
    once. ``scratch``: the buffers to compute in (a caller that computes at every step keeps
    one)."""
    scratch = scratch or Scratch()
    alike_names, alike_values = names, values
    if not unique:  # a tensor read twice: the same array twice
        distinct = dict(zip(names, values))
        alike_names, alike_values = list(distinct), list(distinct.values())
    means = figures_alike(alike_values, scratch)
    if means is not None:
        return StepFigures(list(alike_names), MEAN_ABS, means)
    charted: list[str] = []
    quantities: list[str] = []
    numbers: list[float] = []
    groups: dict[tuple[Any, ...], list[tuple[str, np.ndarray]]] = {}
    arrays: set[str] = set()
    for name, what in zip(names, values):
        if isinstance(what, dict):
            for key, saved in what.items():
                try:
                    reduction, absolute = key
                    number = float(saved)
                except (TypeError, ValueError):
                    continue
                charted.append(name)
                quantities.append(f"{'abs ' if absolute else ''}{reduction}")
                numbers.append(number)
            continue
        try:
            array = what if type(what) is np.ndarray else np.asarray(what)
        except Exception:  # something that is no array: nothing to chart
            continue
        if array.dtype.kind not in "biuf" or not array.size or name in arrays:
            continue
        arrays.add(name)
        if array.size == 1:
            charted.append(name)
            quantities.append("value")
            numbers.append(float(array.reshape(-1)[0]))
        else:
            groups.setdefault((array.shape, array.dtype), []).append((name, array))
    for group in groups.values():
        charted.extend(name for name, _ in group)
        quantities.extend(repeat(MEAN_ABS, len(group)))
        numbers.extend(mean_abs([a for _, a in group], scratch))
    return StepFigures(charted, quantities, numbers)


def figures_alike(values: list[Any], scratch: Scratch | None = None) -> list[float] | None:
    """mean |value| of each of ``values`` when they are numeric arrays of one shape and dtype
    (of more than one element), ``mean_abs``; None otherwise."""
    first = values[0] if values else None
    if type(first) is not np.ndarray or first.size < 2 or first.dtype.kind not in "biuf":
        return None
    try:
        if len({(type(v), v.shape, v.dtype) for v in values}) > 1:
            return None
    except AttributeError:  # a value that is no array
        return None
    return mean_abs(values, scratch)


def mean_abs(arrays: list[np.ndarray], scratch: Scratch | None = None) -> list[float]:
    """mean |value| of each of ``arrays`` (numeric, of one shape and dtype, of more than one
    element), computed in ``scratch``: up to ``STACK_BYTES`` in all, copied side by side
    into one block and reduced in one numpy call; larger, each a ``_SLICE_BYTES`` slice at a
    time (no temporary as large as an array). |x| is summed in float32 for float16 and
    float32 values (numpy's pairwise summation), else in float64; integers are converted
    to float64 first (``abs`` of the most negative one overflows)."""
    scratch = scratch or Scratch()
    first = arrays[0]
    native = first.dtype.kind == "f" and first.dtype.isnative
    dtype = first.dtype if native else _FLOAT64
    count = len(arrays)
    if count * first.size * dtype.itemsize > STACK_BYTES:
        return [_mean_abs_sliced(array.reshape(-1), dtype, scratch) for array in arrays]
    flat = scratch.get(dtype, count * first.size)
    np.concatenate(arrays, out=flat.reshape((count * first.shape[0], *first.shape[1:])))
    rows = flat.reshape(count, first.size)
    np.abs(rows, out=rows)
    sums = np.add.reduce(rows, axis=1, dtype=_SUM_DTYPE.get(dtype.itemsize, _FLOAT64))
    means: list[float] = (sums / first.size).tolist()
    return means


def _mean_abs_sliced(flat: np.ndarray, dtype: np.dtype[Any], scratch: Scratch) -> float:
    """mean |x| of a flat array, ``_SLICE_BYTES`` at a time through a ``dtype`` buffer."""
    step = max(1, _SLICE_BYTES // dtype.itemsize)
    buffer = scratch.get(dtype, min(step, flat.size))
    total_dtype = _SUM_DTYPE.get(dtype.itemsize, _FLOAT64)
    converted = flat.dtype != dtype
    total = 0.0
    for at in range(0, flat.size, step):
        part = flat[at : at + step]
        held = buffer[: part.size]
        if converted:  # (copied into the buffer first: no abs in the array's own dtype)
            held[...] = part
            part = held
        np.abs(part, out=held)
        total += float(np.add.reduce(held, dtype=total_dtype))
    return total / flat.size
