"""The series of one rule (``evaluator.rules.evidence`` fills them, the rule report charts
them): one ``Series`` per tensor(s), quantity, parameter and comparison (and mode, for what a
rule records without a threshold), at most ``MAX_SERIES`` of them.

A quantity that names its step or window ("ratio since step 12", "TRAIN steps 3..9") keeps
one series: its label replaces the step numbers with "…" (``series_label``).
"""

from __future__ import annotations

import re
from typing import Any

from evaluator.rules.series import Series

__all__ = ["MAX_SERIES", "SeriesSet", "series_label"]

MAX_SERIES = 200  # series kept per rule (the count of those left out goes on)
_QUANTITY_CACHE = 4096  # quantities remembered with their step-free label

# "TRAIN steps 3..9", "step 12": a window named in a quantity moves with the step; the series
# is the same one.
_STEP_SPAN = re.compile(r"\b(steps?) \d+(?:\.\.\d+)?|\b\d+\.\.\d+\b")


def series_label(quantity: str) -> str:
    """``quantity`` with the steps and windows it names replaced by "…"."""
    return _STEP_SPAN.sub(lambda m: f"{m.group(1)} …" if m.group(1) else "…", quantity)


class SeriesSet:
    """A rule's series by key ``(tensors, label, parameter, fires_when[, mode])``. Not
    locked: the owning ``Evidence`` writes and reads it under its own lock, except ``labels``
    and lookups, which only the rule's thread makes."""

    __slots__ = ("by_key", "labels", "left_out")

    def __init__(self) -> None:
        self.by_key: dict[tuple[Any, ...], Series] = {}
        self.left_out = 0  # series not kept (past MAX_SERIES)
        self.labels: dict[str, str] = {}  # quantity -> its label, at most _QUANTITY_CACHE

    def __len__(self) -> int:
        return len(self.by_key)

    def label(self, quantity: str) -> str:
        """The series label of ``quantity``, remembered."""
        label = self.labels.get(quantity)
        if label is None:
            label = series_label(quantity)
            if len(self.labels) >= _QUANTITY_CACHE:
                self.labels.clear()  # quantities that name their step: keep the recent ones
            self.labels[quantity] = label
        return label

    def new(self, key: tuple[Any, ...], threshold: float | None) -> Series | None:
        """A new series for ``key``, None past ``MAX_SERIES`` (counted)."""
        if len(self.by_key) >= MAX_SERIES:
            self.left_out += 1
            return None
        names, label, parameter, fires_when = key[:4]
        mode = key[4] if len(key) > 4 else None
        series = self.by_key[key] = Series(names, label, parameter, fires_when, threshold, mode)
        return series

    def to_dict(self, limit: int | None) -> dict[str, Any]:
        """Every series as JSON-ready dicts (``Series.to_dict``), each cut to about ``limit``
        points besides its marks, and how many comparisons fell outside ``MAX_SERIES``."""
        return {
            "series": [s.to_dict(limit) for s in self.by_key.values()],
            "points_left_out": self.left_out,
        }
