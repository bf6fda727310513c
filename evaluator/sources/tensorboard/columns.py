"""A TensorBoard trial's values, held per tag in growable numpy columns. No I/O.

``Series`` is one tag of one folder: its rows (step, order logged, value) in the order the
events came. Scalars of one float dtype are a numpy column of that dtype; histograms are a
``[n, 5]`` float64 column of their exact statistics (min, max, count, sum, sum of squares,
NaN where not logged) and a list of bucket arrays; anything else (tensors, scalars of other
dtypes, a tag logged as two kinds) is a list of the values. TensorBoard's rules apply: a step
logged again replaces the earlier value (the row logged last wins), and ``purge`` drops the
rows of steps ``>= step`` (``SessionLog.START``, a step going back in an old file).

``snapshot()`` gives what readers use: the sorted steps and, for each, the row that holds its
value, over arrays that the series never changes in place afterwards (new rows go past them,
a purge makes new arrays), so a reader on another thread needs no lock.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from evaluator.formats.tensorboard.summary import Histogram

__all__ = ["Series", "Snapshot"]

Kind = Literal["scalar", "histogram", "objects"]
_MIN_ROWS = 16


def _grown(buf: np.ndarray, used: int, extra: int) -> np.ndarray:
    """``buf`` if it has room for ``extra`` more rows after ``used``, else a larger copy."""
    if used + extra <= len(buf):
        return buf
    bigger = np.empty((max(_MIN_ROWS, 2 * (used + extra)), *buf.shape[1:]), buf.dtype)
    bigger[:used] = buf[:used]
    return bigger


class Snapshot:
    """A series as readers see it: ``steps`` (sorted, each once), ``rows[i]`` the row of
    ``steps[i]``, and the storage those rows index."""

    __slots__ = ("kind", "dtype", "steps", "rows", "values", "objects", "_list")

    def __init__(
        self,
        kind: Kind,
        dtype: np.dtype[Any] | None,
        steps: np.ndarray,
        rows: np.ndarray,
        values: np.ndarray,
        objects: list[Any],
    ) -> None:
        self.kind = kind
        self.dtype = dtype
        self.steps = steps
        self.rows = rows
        self.values = values
        self.objects = objects
        self._list: list[int] | None = None

    def find(self, step: int) -> int | None:
        """The row holding ``step``, None if the series has no value there."""
        steps = self._list if self._list is not None else self.step_list()
        i = bisect_left(steps, step)
        if i < len(steps) and steps[i] == step:
            return int(self.rows[i])
        return None

    def step_list(self) -> list[int]:
        """``steps`` as a list of ints (made once)."""
        if self._list is None:
            self._list = self.steps.tolist()
        return self._list

    def value(self, row: int) -> np.ndarray:
        """The value at ``row`` as a new array (a 0-d array for a scalar)."""
        if self.kind == "scalar":
            return np.array(self.values[row], self.dtype)
        return np.array(self.objects[row])

    def histogram(self, row: int) -> Histogram | None:
        """The histogram at ``row``, None if that row holds no histogram."""
        if self.kind == "histogram":
            lo, hi, count, total, squares = self.values[row].tolist()
            return Histogram(
                lo,
                hi,
                count,
                None if math.isnan(total) else total,
                None if math.isnan(squares) else squares,
                self.objects[row],
            )
        held = self.objects[row] if self.kind == "objects" else None
        return held if isinstance(held, Histogram) else None

    def column(self) -> np.ndarray | None:
        """Every value in step order, stacked; None for histograms, or values of different
        shapes or dtypes."""
        if self.kind == "scalar":
            column: np.ndarray = self.values[self.rows].astype(self.dtype)
            return column
        if self.kind == "histogram":
            return None
        held = [self.objects[r] for r in self.rows.tolist()]
        if any(isinstance(v, Histogram) for v in held):
            return None
        arrays = [np.asarray(v) for v in held]
        if arrays and any(a.shape != arrays[0].shape or a.dtype != arrays[0].dtype for a in arrays):
            return None
        return np.stack(arrays) if arrays else np.zeros(0)


class Series:
    """One tag of one folder, appended to by the source's scans (one thread)."""

    def __init__(self) -> None:
        self.kind: Kind | None = None
        self.dtype: np.dtype[Any] | None = None
        self._steps = np.empty(_MIN_ROWS, np.int64)
        self._order = np.empty(_MIN_ROWS, np.int64)
        self._values = np.empty(0)
        self._objects: list[Any] = []
        self._n = 0
        self._last_step = 0  # the step of the last row (when there is one)
        self._ordered = True  # steps strictly increasing in row order
        self._snap: Snapshot | None = None

    def __len__(self) -> int:
        return self._n

    def extend_scalars(self, steps: np.ndarray, order: np.ndarray, values: np.ndarray) -> None:
        """Append float scalars (one dtype) logged at ``steps`` in ``order``."""
        if not len(steps):
            return
        if self.kind is None:
            self.kind, self.dtype = "scalar", values.dtype
            self._values = np.empty(_MIN_ROWS, values.dtype)
        if self.kind != "scalar" or values.dtype != self.dtype:
            for s, o, v in zip(steps.tolist(), order.tolist(), values, strict=True):
                self.add(s, o, v)
            return
        n, extra = self._n, len(steps)
        self._reserve(extra)
        self._values = _grown(self._values, n, extra)
        self._values[n : n + extra] = values
        self._append_steps(steps, order)

    def add(self, step: int, order: int, value: Any) -> None:
        """Append one value: a numpy scalar or array, or a ``Histogram``."""
        if self.kind is None:
            self._start(value)
        n = self._n
        if self.kind == "scalar" and not (
            isinstance(value, np.generic) and value.dtype == self.dtype
        ):
            self._to_objects()
        elif self.kind == "histogram" and not isinstance(value, Histogram):
            self._to_objects()
        if n >= len(self._steps):
            self._reserve(1)
        if self.kind == "scalar":
            if n >= len(self._values):
                self._values = _grown(self._values, n, 1)
            self._values[n] = value
        elif self.kind == "histogram":
            h = value
            if n >= len(self._values):
                self._values = _grown(self._values, n, 1)
            total, squares = h.sum, h.sum_squares
            self._values[n] = (
                h.min,
                h.max,
                h.count,
                math.nan if total is None else total,
                math.nan if squares is None else squares,
            )
            self._objects.append(h.buckets)
        else:
            self._objects.append(value)
        if self._ordered and n and step <= self._last_step:
            self._ordered = False
        self._steps[n] = self._last_step = step
        self._order[n] = order
        self._n = n + 1
        self._snap = None

    def _start(self, value: Any) -> None:
        if isinstance(value, Histogram):
            self.kind = "histogram"
            self._values = np.empty((_MIN_ROWS, 5), np.float64)
        elif isinstance(value, np.generic) and value.dtype.kind == "f":
            self.kind, self.dtype = "scalar", value.dtype
            self._values = np.empty(_MIN_ROWS, value.dtype)
        else:
            self.kind = "objects"

    def _to_objects(self) -> None:
        """Hold every row as a Python object from now on (a tag logged as two kinds)."""
        snap = Snapshot(
            self.kind or "objects",
            self.dtype,
            self._steps[: self._n],
            np.arange(self._n),
            self._values,
            self._objects,
        )
        rows = range(self._n)
        if self.kind == "scalar":
            self._objects = [self._values[r] for r in rows]
        else:
            self._objects = [snap.histogram(r) for r in rows]
        self.kind, self.dtype, self._values = "objects", None, np.empty(0)

    def _reserve(self, extra: int) -> None:
        self._steps = _grown(self._steps, self._n, extra)
        self._order = _grown(self._order, self._n, extra)

    def _append_steps(self, steps: np.ndarray, order: np.ndarray) -> None:
        n, extra = self._n, len(steps)
        if self._ordered and (
            (n and steps[0] <= self._last_step) or (extra > 1 and np.any(np.diff(steps) <= 0))
        ):
            self._ordered = False
        self._steps[n : n + extra] = steps
        self._order[n : n + extra] = order
        self._n = n + extra
        self._last_step = int(steps[-1])
        self._snap = None

    def purge(self, step: int) -> None:
        """Drop the rows of steps ``>= step`` (new arrays: snapshots keep the old ones)."""
        n = self._n
        keep = np.flatnonzero(self._steps[:n] < step)
        if len(keep) == n:
            return
        self._steps = self._steps[keep]
        self._order = self._order[keep]
        if self.kind in ("scalar", "histogram"):
            self._values = self._values[keep]
        if self.kind != "scalar":
            self._objects = [self._objects[r] for r in keep.tolist()]
        self._n = len(keep)
        self._last_step = int(self._steps[-1]) if len(keep) else 0
        self._snap = None

    def snapshot(self, keep: Callable[[np.ndarray], np.ndarray] | None = None) -> Snapshot:
        """The series as readers see it (made again only after a change); ``keep`` selects
        the steps readers may see (a step range), given the sorted steps."""
        if self._snap is not None:
            return self._snap
        n = self._n
        steps = self._steps[:n]
        if self._ordered:
            rows = np.arange(n)
        else:  # by step, then order logged; the last row of each step wins
            by = np.lexsort((self._order[:n], steps))
            sorted_steps = steps[by]
            last = np.ones(n, bool)
            last[:-1] = sorted_steps[1:] != sorted_steps[:-1]
            rows = by[last]
            steps = sorted_steps[last]
        if keep is not None:
            chosen = keep(steps)
            steps, rows = steps[chosen], rows[chosen]
        kind = self.kind or "objects"
        self._snap = Snapshot(kind, self.dtype, steps, rows, self._values, self._objects)
        return self._snap


def _nan(x: float | None) -> float:
    return math.nan if x is None else x
