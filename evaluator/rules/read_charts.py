"""Charting what a rule reads (a rule that records no comparisons, such as a user's rule
written for smdebug): each tensor read becomes a series of its own (``Evidence.watch_reads``).

This sits on the rule's hot path, so it is paid by the step, not by the read, and no value is
ever read again for a chart:

* a read is noted with a reference to what was read (``Evidence.note_read``: the array the
  rule got, or the reductions it read), at most ``MAX_READS_CHARTED`` per step;
* after the step (``ReadCharts.offer``) the steps are sampled as TensorBoard downsamples its
  scalars: a reservoir of ``SAMPLED_STEPS`` steps (Algorithm R, seeded, so a run charts the
  same steps every time), and besides it, always, the first step, the last step and every
  step the rule fired at (up to ``MAX_MARKS``). A step not kept is dropped at once (the last
  one when a later step replaces it);
* a step kept keeps its references while the arrays held stay under ``KEPT_BYTES`` (then its
  figures are computed at once and the references dropped), and the figures are computed
  when the report asks (``series``), once per step: a scalar as ``value``, an array as
  ``mean |value|`` (arrays of one shape in one numpy call), a reduction as itself.

An array the rule changes in place after reading it is charted as changed (the reference is
the rule's own array: a copy would cost every read what the chart saves).

A series counts the steps at which its tensor was read. Reads of another step than the one
evaluated (a window, the step before) are counted as reads but not charted: the observer does
not say which mode such a step number counts in.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.rules.series import MAX_MARKS, Point, _decimate, json_number

__all__ = ["MAX_READS_CHARTED", "SAMPLED_STEPS", "ReadCharts", "figures"]

MAX_READS_CHARTED = 200  # reads kept per step of a rule that watches its reads
SAMPLED_STEPS = 256  # steps of the reservoir (besides the first, the last and the firings)
HELD_BYTES = 256 * 1024 * 1024  # bytes of arrays held for one step's charts, at most
KEPT_BYTES = 16 * 1024 * 1024  # bytes of arrays kept by reference for the steps sampled

Figure = tuple[str, str, float]  # tensor, quantity, value


def figures(names: list[str], values: list[Any]) -> list[Figure]:
    """The chart figures of one step's reads (``names[i]`` read as ``values[i]``): a scalar
    as ``value``, an array as ``mean |value|`` (arrays of one shape in one numpy call: a rule
    reads alike tensors at a step), reductions (a dict) as ``[abs ]<reduction>``; what is
    neither is left out, and a tensor read twice is charted once."""
    first = values[0]
    if type(first) is np.ndarray and first.size > 1:
        unique = dict(zip(names, values))  # a tensor read twice: the same array twice
        try:  # every value an array of first's shape, or it raises
            stacked = np.array(list(unique.values()))
        except (ValueError, TypeError):
            stacked = None
        if stacked is not None and stacked.shape[1:] == first.shape:
            if stacked.dtype.kind in "biuf":
                means = (_sums(stacked.reshape(len(unique), -1)) / first.size).tolist()
                return [(name, "mean |value|", mean) for name, mean in zip(unique, means)]
    out: list[Figure] = []
    groups: dict[tuple[Any, ...], list[tuple[str, np.ndarray]]] = {}
    arrays: set[str] = set()
    for name, what in zip(names, values):
        if isinstance(what, dict):
            for key, saved in what.items():
                try:
                    reduction, absolute = key
                    out.append((name, f"{'abs ' if absolute else ''}{reduction}", float(saved)))
                except (TypeError, ValueError):
                    continue
            continue
        try:
            array = what if type(what) is np.ndarray else np.asarray(what)
        except Exception:  # something that is no array: nothing to chart
            continue
        if array.dtype.kind not in "biuf" or not array.size or name in arrays:
            continue
        arrays.add(name)
        if array.size == 1:
            out.append((name, "value", float(array.reshape(-1)[0])))
        else:
            groups.setdefault((array.shape, array.dtype), []).append((name, array))
    for group in groups.values():
        stacked = np.stack([a for _, a in group]).reshape(len(group), -1)
        means = (_sums(stacked) / stacked.shape[1]).tolist()
        out.extend((name, "mean |value|", mean) for (name, _), mean in zip(group, means))
    return out


def _sums(rows: np.ndarray) -> np.ndarray:
    """The sum of |x| of each row, in float64 (``abs`` of a float is exact in its own dtype;
    integers are converted first: ``abs`` of the most negative one overflows)."""
    if rows.dtype.kind != "f":
        rows = rows.astype(np.float64)
    sums: np.ndarray = np.add.reduce(np.abs(rows), axis=1, dtype=np.float64)
    return sums


class _Kept:
    """A step kept: its reads by reference (``names``, ``values``) until ``figures`` are
    computed."""

    __slots__ = ("figures", "mark", "mode", "names", "nbytes", "step", "values")

    def __init__(self, step: int, mode: str | None, names: list[str], values: list[Any]) -> None:
        self.step, self.mode, self.names, self.values = step, mode, names, values
        self.nbytes = 0  # counted when kept
        self.figures: list[Figure] | None = None
        self.mark = False  # the first or a firing step: never replaced

    def compute(self) -> int:
        """Compute the figures (once) and drop the references; the bytes freed."""
        if self.figures is None:
            self.figures = figures(self.names, self.values) if self.names else []
            self.names, self.values = [], []
        freed, self.nbytes = self.nbytes, 0
        return freed


class ReadCharts:
    """The sampled steps of what one rule read, and how many steps read each tensor. Written
    by the rule's thread (``offer``), read by ``series``: the owning ``Evidence`` locks both."""

    def __init__(self, sampled: int = SAMPLED_STEPS) -> None:
        self.sampled = sampled
        self._rng = random.Random(0)
        self._offered = 0
        self._reservoir: list[_Kept] = []
        self._marks: list[_Kept] = []  # the first step and the firing steps
        self._marked = 0
        self._kept_bytes = 0
        self._last: _Kept | None = None
        self._counts: dict[str | None, Counter[str]] = {}
        self._run: tuple[str | None, tuple[str, ...]] | None = None
        self._repeats = 0

    def offer(
        self, step: int, mode: str | None, names: list[str], values: list[Any], fired: bool
    ) -> None:
        """The reads of one evaluated ``step`` in ``mode``: ``names[i]`` read as ``values[i]``."""
        run = (mode, tuple(names))  # a rule reads the same tensors at step after step
        if run != self._run:
            self._count_run()
            self._run = run
        self._repeats += 1
        self._offered += 1
        slot = -1
        if self._offered <= self.sampled:
            slot = self._offered - 1
        else:
            j = self._rng.randrange(self._offered)
            if j < self.sampled:
                slot = j
        mark = self._offered == 1 or (fired and self._marked < MAX_MARKS)
        kept = _Kept(step, mode, names, values)
        if slot < 0 and not mark:
            self._last = kept  # held until a later step replaces it
            return
        self._last = None
        kept.nbytes = sum(getattr(v, "nbytes", 0) for v in values)
        if self._kept_bytes + kept.nbytes > KEPT_BYTES:
            kept.compute()
        self._kept_bytes += kept.nbytes
        if mark:
            kept.mark = True
            self._marked += 1
            self._marks.append(kept)
        if slot >= 0:
            if slot < len(self._reservoir):
                replaced = self._reservoir[slot]
                if not replaced.mark:  # dropped: its references go
                    self._kept_bytes -= replaced.nbytes
                    replaced.names, replaced.values, replaced.nbytes = [], [], 0
                self._reservoir[slot] = kept
            else:
                self._reservoir.append(kept)

    def _count_run(self) -> None:
        """Count the steps of the run of steps that read the same tensors."""
        if self._run is not None and self._repeats:
            mode, names = self._run
            counts = self._counts.setdefault(mode, Counter())
            for name in set(names):
                counts[name] += self._repeats
        self._repeats = 0

    def offer_pending(
        self,
        names: list[str],
        values: list[Any],
        steps: list[int],
        step: int | None,
        fired: bool,
        mode_of: Callable[[int], str | None],
    ) -> None:
        """``offer`` the reads (``names[i]`` read as ``values[i]``) of the evaluated ``step``
        in its mode (``mode_of``): all of them when ``steps`` is empty, else those read at
        ``steps[i] == step`` (at each step read, when ``step`` is None). Never raises."""
        by_step: dict[int, tuple[list[str], list[Any]]] = {}
        if not steps and step is not None:
            by_step[step] = (names, values)  # the reads of a step's evaluation
        for name, s, what in zip(names, steps, values):
            if step is None or s == step:
                found = by_step.setdefault(s, ([], []))
                found[0].append(name)
                found[1].append(what)
        for read_step, (read, what) in by_step.items():
            try:
                self.offer(read_step, mode_of(read_step), read, what, fired)
            except Exception:  # a chart is a help; never fail a rule over it
                continue

    def __len__(self) -> int:
        self._count_run()
        return sum(len(c) for c in self._counts.values())

    def series(self, limit: int | None = None, room: int = 10**9) -> tuple[list[dict[str, Any]], int]:
        """The series (``Series.to_dict``'s fields), at most ``room`` of them, each cut to about
        ``limit`` points besides the first, last and firing steps; and how many reads the
        series left out held."""
        self._count_run()
        kept = [*self._marks, *self._reservoir]
        if self._last is not None:
            kept.append(self._last)
        for entry in kept:
            self._kept_bytes -= entry.compute()
        marked = {entry.step for entry in self._marks}
        if kept:
            marked.add(max(entry.step for entry in kept))
        by_key: dict[tuple[str, str, str | None], dict[int, float]] = {}
        for entry in kept:
            for name, quantity, value in entry.figures or ():
                by_key.setdefault((name, quantity, entry.mode), {}).setdefault(entry.step, value)
        out: list[dict[str, Any]] = []
        left_out = 0
        for (name, quantity, mode), points in sorted(by_key.items(), key=_order):
            count = self._counts.get(mode, Counter()).get(name, 0)
            if len(out) >= room:
                left_out += count
                continue
            out.append(_series_dict(name, quantity, mode, count, _cut(points, marked, limit)))
        return out, left_out


def _order(item: tuple[tuple[str, str, str | None], Any]) -> tuple[str, str, str]:
    name, quantity, mode = item[0]
    return (name, quantity, mode or "")


def _cut(points: dict[int, float], marked: set[int], limit: int | None) -> list[Point]:
    """The points in step order, about ``limit`` of them (lowest and highest of runs) besides
    the marked steps."""
    ordered = sorted(points.items())
    if limit is None or len(ordered) <= limit:
        return ordered
    kept = set(_decimate(ordered, max(1, limit // 2)))
    kept.update((s, v) for s, v in ordered if s in marked)
    return sorted(kept, key=lambda p: p[0])


def _series_dict(
    name: str, quantity: str, mode: str | None, count: int, points: list[Point]
) -> dict[str, Any]:
    return {
        "tensors": [name],
        "quantity": quantity,
        "mode": mode,
        "parameter": None,
        "comparison": None,
        "threshold": None,
        "threshold_changes": [],
        "count": count,
        "points": [[s, json_number(v)] for s, v in points],
        "firings": [],
        "firing_count": 0,
        "closest": None,
    }
