"""A rule's series: one quantity of one tensor (or group) over the steps it evaluated, kept
bounded whatever the run's length (``evaluator.rules.evidence`` records into it; the rule
report charts it)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_MARKS", "SERIES_BUCKETS", "Point", "Series", "json_number"]

SERIES_BUCKETS = 1024  # a series keeps at most 2 points per bucket, plus its marks
MAX_MARKS = 1000  # firing points kept exactly per series (the count goes on)


def json_number(value: float | None) -> float | str | None:
    """``value`` as JSON allows it: NaN and infinities as the strings "NaN", "Infinity",
    "-Infinity" (JSON has no such numbers)."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


Point = tuple[int, float]


def _lower(a: Point, b: Point) -> Point:
    """The point of lower value; a NaN value loses to any other."""
    return b if math.isnan(a[1]) or b[1] < a[1] else a


def _higher(a: Point, b: Point) -> Point:
    return b if math.isnan(a[1]) or b[1] > a[1] else a


class Series:
    """One quantity of one tensor (or group of tensors) over the steps a rule evaluated.

    Bounded: values fall into buckets of ``width`` consecutive points, each keeping its lowest
    and highest point; when ``SERIES_BUCKETS`` are full, neighbours merge and ``width``
    doubles. Firing points (up to ``MAX_MARKS``) and the closest approach are kept exactly.
    Written by the rule's thread under the owning ``Evidence``'s lock, read under it."""

    __slots__ = (
        "_buckets",
        "_closest",
        "_margin",
        "_open",
        "_open_count",
        "count",
        "fires_when",
        "firing_count",
        "firings",
        "mode",
        "parameter",
        "quantity",
        "tensors",
        "threshold",
        "threshold_changes",
        "width",
    )

    def __init__(
        self,
        tensors: tuple[str, ...],
        quantity: str,
        parameter: str | None,
        fires_when: str | None,
        threshold: float | None,
        mode: str | None = None,
    ) -> None:
        self.tensors = tensors
        self.quantity = quantity
        self.mode = mode  # TRAIN, EVAL...: a series the rule keeps per mode (record's)
        self.parameter = parameter
        self.fires_when = fires_when
        self.threshold = threshold
        self.threshold_changes: list[Point] = []  # (step, new threshold) when it moves
        self.count = 0
        self.width = 1
        self._buckets: list[tuple[Point, Point]] = []
        self._open: tuple[Point, Point] | None = None
        self._open_count = 0
        self.firings: list[Point] = []
        self.firing_count = 0
        self._closest: Point | None = None
        self._margin = math.inf

    def add(
        self,
        step: int,
        value: float,
        threshold: float | None = None,
        fired: bool = False,
        margin: float = math.nan,
    ) -> None:
        # Called for every comparison: positional arguments, and _lower/_higher inlined.
        point = (step, value)
        self.count += 1
        if threshold is not None and threshold != self.threshold:
            if len(self.threshold_changes) < MAX_MARKS:
                self.threshold_changes.append((step, threshold))
            self.threshold = threshold
        if fired:
            self.firing_count += 1
            if len(self.firings) < MAX_MARKS:
                self.firings.append(point)
        if margin < self._margin:
            self._margin, self._closest = margin, point
        if self.width == 1:  # a bucket per point (the open one is always empty)
            self._buckets.append((point, point))
            if len(self._buckets) >= SERIES_BUCKETS:
                self._merge()
            return
        low_high = self._open
        if low_high is None:
            low_high = (point, point)
        else:
            low, high = low_high
            low_high = (
                point if math.isnan(low[1]) or value < low[1] else low,
                point if math.isnan(high[1]) or value > high[1] else high,
            )
        self._open_count += 1
        if self._open_count >= self.width:
            self._buckets.append(low_high)
            self._open, self._open_count = None, 0
            if len(self._buckets) >= SERIES_BUCKETS:
                self._merge()
        else:
            self._open = low_high

    def _merge(self) -> None:
        b = self._buckets
        self._buckets = [
            (_lower(b[i][0], b[i + 1][0]), _higher(b[i][1], b[i + 1][1]))
            for i in range(0, len(b) - 1, 2)
        ] + ([b[-1]] if len(b) % 2 else [])
        self.width *= 2

    def points(self, limit: int | None = None) -> list[Point]:
        """The kept points in step order, marks included; at most about ``limit`` besides
        the marks when given (lowest and highest of each of ``limit // 2`` runs)."""
        kept = [p for bucket in self._buckets for p in bucket]
        if self._open is not None:
            kept.extend(self._open)
        kept = sorted(set(kept), key=lambda p: p[0])
        if limit is not None and len(kept) > limit:
            kept = _decimate(kept, max(1, limit // 2))
        marks = self.firings + ([self._closest] if self._closest is not None else [])
        return sorted(set(kept) | set(marks), key=lambda p: p[0])

    @property
    def closest(self) -> Point | None:
        return self._closest

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        def pts(points: list[Point]) -> list[list[Any]]:
            return [[s, json_number(v)] for s, v in points]

        return {
            "tensors": list(self.tensors),
            "quantity": self.quantity,
            "mode": self.mode,
            "parameter": self.parameter,
            "comparison": self.fires_when,
            "threshold": json_number(self.threshold),
            "threshold_changes": pts(self.threshold_changes),
            "count": self.count,
            "points": pts(self.points(limit)),
            "firings": pts(self.firings),
            "firing_count": self.firing_count,
            "closest": pts([self._closest])[0] if self._closest is not None else None,
        }


def _decimate(points: list[Point], runs: int) -> list[Point]:
    """The lowest and highest point of each of ``runs`` equal runs of ``points``."""
    out: list[Point] = []
    size = len(points) / runs
    for i in range(runs):
        chunk = points[int(i * size) : int((i + 1) * size)]
        if chunk:
            low, high = chunk[0], chunk[0]
            for p in chunk[1:]:
                low, high = _lower(low, p), _higher(high, p)
            out.extend(sorted({low, high}, key=lambda p: p[0]))
    return out
