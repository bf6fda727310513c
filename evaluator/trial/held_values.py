"""A TensorBoard trial's values, answered from columns held in memory (``HeldTensors``).

The TensorBoard source decodes each value once into per-tag columns (``tb_columns``); at the
end of each scan it hands the trial a ``HeldSteps``: the new steps of each mode (for the
trial's step bookkeeping, ``TrialState.apply_held_steps``) and the columns' new snapshots,
published to ``HeldTensors`` under the trial's lock. ``Tensor`` asks ``HeldTensors`` for
values, reductions, histograms, steps and whole columns, with the same answers and exceptions
as for smdebug output; nothing waits on storage (a value exists once its step does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.errors import (
    HistogramValueUnavailable,
    InvalidWorker,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.formats.tb_summary import Histogram
from evaluator.modes import ModeKeys, StepState
from evaluator.trial.reductions import compute_reduction
from evaluator.trial.tb_columns import Snapshot

__all__ = ["HeldSteps", "HeldTensors", "Key"]

GLOBAL = ModeKeys.GLOBAL
WORKER = "worker_0"
Key = tuple[ModeKeys, str]
_NOT_REDUCTIONS = frozenset({"histogram", "histogram_stats", "count"})


@dataclass
class HeldSteps:
    """One scan's news: per mode (in the order the modes first appear), the new mode steps
    and their global steps, sorted by global step; the tags each mode logged; and the
    snapshots to publish."""

    steps: list[tuple[ModeKeys, list[int], list[int]]]
    names: dict[ModeKeys, set[str]]
    snapshots: dict[Key, tuple[Snapshot, ...]]
    held: HeldTensors

    def publish(self) -> None:
        """Make the snapshots the ones readers see (under the trial's lock)."""
        by_name: dict[str, list[tuple[ModeKeys, tuple[Snapshot, ...]]]] = {}
        for (mode, tag), snaps in self.snapshots.items():
            by_name.setdefault(tag, []).append((mode, snaps))
        self.held.snapshots, self.held.by_name = self.snapshots, by_name


class HeldTensors:
    """The published columns of a TensorBoard trial: ``(mode, tag) ->`` one snapshot per
    folder of that mode holding the tag, in folder order (a later folder wins a step)."""

    def __init__(self, phases: Callable[[], bool]) -> None:
        self.snapshots: dict[Key, tuple[Snapshot, ...]] = {}
        self.by_name: dict[str, list[tuple[ModeKeys, tuple[Snapshot, ...]]]] = {}
        self._phases = phases

    def to_global(self, mode: ModeKeys, steps: np.ndarray) -> np.ndarray:
        if not self._phases():
            return steps
        return 2 * steps + (1 if mode == ModeKeys.EVAL else 0)

    # ---------------------------------------------------------------- lookups

    def find(
        self, name: str, step: int, mode: ModeKeys, global_to_mode: dict[int, Any]
    ) -> tuple[Snapshot, int] | None:
        """The snapshot and row holding ``name`` at ``step`` of ``mode`` (a global step for
        GLOBAL), None if none does."""
        if mode is GLOBAL and self._phases():
            key = global_to_mode.get(step)
            if key is None:
                return None
            mode, step = key
        for snap in reversed(self.snapshots.get((mode, name), ())):
            row = snap.find(step)
            if row is not None:
                return snap, row
        return None

    def locate(self, view: Any, name: str, step: int, mode: ModeKeys, worker: str | None) -> Any:
        """``find``, raising smdebug's exceptions as ``Tensor`` does when there is nothing."""
        found = self.find(name, step, mode, view.state.global_to_mode)
        if found is None:
            view.refresh(name)
            state = view.step_state(step, mode)
            found = self.find(name, step, mode, view.state.global_to_mode)
            if found is None:
                if state == StepState.AVAILABLE:
                    raise TensorUnavailableForStep(name, step, mode)
                if state == StepState.UNAVAILABLE:
                    raise StepUnavailable(step, mode)
                raise StepNotYetAvailable(step, mode)
        if worker is not None and worker != WORKER:
            raise InvalidWorker(worker)
        return found

    # ---------------------------------------------------------------- answers

    def value(
        self, view: Any, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> np.ndarray:
        snap, row = self.locate(view, name, step, mode, worker)
        if snap.histogram(row) is not None:
            raise HistogramValueUnavailable(name, step, mode)
        value: np.ndarray = snap.value(row)
        return value

    def histogram(
        self, view: Any, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> Histogram:
        snap, row = self.locate(view, name, step, mode, worker)
        found: Histogram | None = snap.histogram(row)
        if found is None:
            raise TensorUnavailableForStep(name, step, mode)
        return found

    def reduction_value(
        self, view: Any, name: str, step: int, mode: ModeKeys, worker: str | None, how: Any
    ) -> Any:
        """A histogram's reduction as logged (``count`` too), else one computed from the
        value; ``how`` is (reduction name, abs)."""
        snap, row = self.locate(view, name, step, mode, worker)
        if snap.kind == "histogram" and how in _EXACT:  # straight from the statistics
            exact = _exact(snap.values[row].tolist(), how[0])
            if exact is not None:
                return np.float64(exact)
        h = snap.histogram(row)
        if h is None:
            return compute_reduction(snap.value(row), how[0], how[1])
        if how == ("count", False):
            return np.float64(h.count)
        found = h.reductions().get(how)
        if found is None or how[0] in _NOT_REDUCTIONS:
            raise TensorUnavailableForStep(how[0], step, mode)
        return np.float64(found)

    def reduction_values(
        self, view: Any, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> dict[tuple[str, bool], Any]:
        snap, row = self.locate(view, name, step, mode, worker)
        h = snap.histogram(row)
        if h is None:
            return {}
        return {key: np.float64(v) for key, v in h.reductions().items()}

    def steps(self, name: str, mode: ModeKeys) -> list[int]:
        """Steps at which ``name`` was logged: global steps for GLOBAL, else mode steps."""
        steps: list[int] = self.column_steps(name, mode)[0].tolist()
        return steps

    def column_steps(
        self, name: str, mode: ModeKeys
    ) -> tuple[np.ndarray, list[tuple[Snapshot, np.ndarray, np.ndarray]]]:
        """The sorted steps of ``name`` in ``mode``, and for each snapshot the positions of
        its steps there and the rows that hold them (a later folder wins a step)."""
        parts: list[tuple[Snapshot, np.ndarray]] = []
        for m, snaps in self.by_name.get(name, ()):
            if mode is not GLOBAL and m != mode:
                continue
            for snap in snaps:
                steps = snap.steps if mode is not GLOBAL else self.to_global(m, snap.steps)
                parts.append((snap, steps))
        if len(parts) == 1:
            snap, steps = parts[0]
            return steps, [(snap, np.arange(len(steps)), snap.rows)]
        every = np.unique(np.concatenate([s for _, s in parts])) if parts else np.zeros(0, int)
        owner = np.full(len(every), -1)
        for i, (_, steps) in enumerate(parts):
            owner[np.searchsorted(every, steps)] = i
        out = []
        for i, (snap, steps) in enumerate(parts):
            at = np.searchsorted(every, steps)
            mine = owner[at] == i
            out.append((snap, at[mine], snap.rows[mine]))
        return every, out

    def column(self, name: str, mode: ModeKeys) -> tuple[list[int], np.ndarray | None]:
        """Every step of ``name`` in ``mode`` and its values stacked (None for histograms, or
        values of different shapes)."""
        every, parts = self.column_steps(name, mode)
        if len(parts) == 1 and len(parts[0][0].steps) == len(every):
            return every.tolist(), parts[0][0].column()
        stacked = []
        for snap, _, rows in parts:
            sub = Snapshot(snap.kind, snap.dtype, rows, rows, snap.values, snap.objects).column()
            if sub is None:
                return every.tolist(), None
            stacked.append(sub)
        if not stacked or any(
            s.dtype != stacked[0].dtype or s.shape[1:] != stacked[0].shape[1:] for s in stacked
        ):
            return every.tolist(), None
        values = np.empty((len(every), *stacked[0].shape[1:]), stacked[0].dtype)
        for (_, at, _), sub in zip(parts, stacked, strict=True):
            values[at] = sub
        return every.tolist(), values

    def names_at(
        self, step: int | None, mode: ModeKeys, global_to_mode: dict[int, Any]
    ) -> set[str]:
        """Tags logged at ``step`` of ``mode`` (a global step for GLOBAL)."""
        names = {tag for (m, tag) in self.snapshots if mode is GLOBAL or m == mode}
        if step is None:
            return names
        return {n for n in names if self.find(n, step, mode, global_to_mode) is not None}


_EXACT = frozenset((name, False) for name in ("min", "max", "count", "sum", "mean"))


def _exact(stats: list[float], name: str) -> float | None:
    """A reduction read off a histogram's logged statistics (min, max, count, sum, sum of
    squares), the value ``Histogram.reductions`` gives; None when it needs the buckets (no
    sum logged) or the histogram is empty (it has no reductions)."""
    lo, hi, count, total, _ = stats
    if not count > 0:
        return None
    if name == "count":
        return count
    if name in ("min", "max"):
        return lo if name == "min" else hi
    if total != total:  # NaN: the writer logged no sum (TF2)
        return None
    return total if name == "sum" else total / count
