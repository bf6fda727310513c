"""A logged histogram (``Histogram``) and the reductions it gives, in no format's terms:
TensorBoard logs histograms, and smdebug output can hold one saved as two reductions
(``histogram_from_reductions``). ``Tensor.histogram`` answers with it whatever the format."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["Histogram", "histogram_from_reductions"]


@dataclass(frozen=True, slots=True)
class Histogram:
    """A logged histogram: ``buckets`` is ``[k, 3]`` float64 rows (left edge, right edge,
    count); ``sum`` and ``sum_squares`` are None when the writer did not log them (TF2).

    Exact: ``min``, ``max``, ``count``, the maximum of absolute values, and with ``sum`` and
    ``sum_squares`` (torch, tensorboardX) the mean, variance, standard deviation and L2 norm.
    Everything else comes from the buckets, each value placed in its bucket (at its middle, or
    spread evenly over a bucket that holds zero for absolute values): such a mean or mean of
    absolute values is within ``error_bound`` (half the widest non-empty bucket) of the true one,
    a standard deviation or root mean square too, and an L1 norm within ``count *
    error_bound``."""

    min: float
    max: float
    count: float
    sum: float | None
    sum_squares: float | None
    buckets: np.ndarray

    @property
    def exact_moments(self) -> bool:
        """Whether mean, variance and L2 norm are exact (the writer logged sum and squares)."""
        return self.sum is not None and self.sum_squares is not None

    @property
    def error_bound(self) -> float:
        """Half the width of the widest non-empty bucket: the bound of bucket-based values."""
        b = self.buckets
        if not len(b):
            return 0.0
        full = b[b[:, 2] > 0]
        return float(np.max(full[:, 1] - full[:, 0]) / 2) if len(full) else 0.0

    def reductions(self) -> dict[tuple[str, bool], float]:
        """Every reduction this histogram can give, keyed as smdebug keys saved reductions
        (``(name, abs)``): exact ones, and bucket-based ones within ``error_bound``."""
        n = self.count
        if not n > 0:
            return {}  # an empty histogram (a TF2 one of no values) has no reductions
        out: dict[tuple[str, bool], float] = {("min", False): self.min, ("max", False): self.max}
        out[("max", True)] = max(abs(self.min), abs(self.max))
        if self.min >= 0 or self.max <= 0:
            out[("min", True)] = min(abs(self.min), abs(self.max))
        b = self.buckets
        counts, left, right = b[:, 2], b[:, 0], b[:, 1]
        mid = (left + right) / 2
        if self.sum is not None and self.sum_squares is not None:
            total, squares = self.sum, self.sum_squares
            mean = total / n
            variance = max(squares / n - mean * mean, 0.0)
        else:
            total = float(np.dot(counts, mid))
            squares = float(np.dot(counts, mid * mid))
            mean = total / n
            variance = float(np.dot(counts, (mid - mean) ** 2) / n)
        out[("sum", False)] = total
        out[("mean", False)] = mean
        out[("variance", False)] = variance
        out[("std", False)] = math.sqrt(variance)
        out[("l2", False)] = math.sqrt(max(squares, 0.0))
        abs_mid = np.abs(mid)
        # Buckets are ordered and apart: at most one holds zero inside (Python floats: no
        # warning for infinite edges, the same IEEE results as numpy's).
        for i in np.flatnonzero((left < 0) & (right > 0)).tolist():
            lo, hi = float(left[i]), float(right[i])
            abs_mid[i] = (lo * lo + hi * hi) / (2 * (hi - lo))
        l1 = float(np.dot(counts, abs_mid))
        out[("l1", False)] = l1
        out[("mean", True)] = l1 / n
        out[("sum", True)] = l1
        return out

    def zero_fraction(self) -> float:
        """The fraction of values in buckets that hold zero: an upper bound of the fraction of
        exact zeros (equal to it when that bucket is ``[0, 0]``, or when every value is 0)."""
        if self.count <= 0:
            return math.nan
        b = self.buckets
        holds = (b[:, 0] <= 0) & (b[:, 1] >= 0)
        return float(np.sum(b[holds, 2]) / self.count)


def histogram_from_reductions(saved: Mapping[str, np.ndarray]) -> Histogram:
    """The ``Histogram`` a TensorBoard trial saved as reductions (``histogram_stats`` and
    ``histogram``)."""
    stats = np.asarray(saved["stats"], dtype=np.float64).reshape(-1)
    total, squares = float(stats[3]), float(stats[4])
    return Histogram(
        float(stats[0]),
        float(stats[1]),
        float(stats[2]),
        None if np.isnan(total) else total,
        None if np.isnan(squares) else squares,
        np.asarray(saved["buckets"], dtype=np.float64).reshape(-1, 3),
    )
