"""A TensorBoard trial's values, answered from columns held in memory (``HeldTensors``).

The TensorBoard source decodes each value once into per-tag columns (``columns``); at the
end of each scan it hands the trial a ``StepBatch`` (``held_steps``): the new steps of each
mode (for the trial's step bookkeeping, ``TrialState.apply_steps``) and a ``publish`` that
makes the columns' new snapshots the ones ``HeldTensors`` answers from, under the trial's
lock. ``HeldTensors`` is the trial's ``ValueStore``: values, reductions, histograms, steps and
whole columns, with the same answers and exceptions as for smdebug output; nothing waits on
storage (a value exists once its step does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.engine.columns import Column, Columns
from evaluator.engine.reads import note_read, observing
from evaluator.engine.reductions import compute_reduction
from evaluator.engine.source import StepBatch
from evaluator.errors import (
    HistogramValueUnavailable,
    InvalidWorker,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.formats.histogram import Histogram
from evaluator.modes import ModeKeys, StepState
from evaluator.sources.tensorboard.columns import Snapshot

if TYPE_CHECKING:
    from evaluator.engine.view import TrialView

__all__ = ["HeldTensors", "Key", "held_steps"]

GLOBAL = ModeKeys.GLOBAL
WORKER = "worker_0"
Key = tuple[ModeKeys, str]
_NOT_REDUCTIONS = frozenset({"histogram", "histogram_stats", "count"})


def held_steps(
    steps: list[tuple[ModeKeys, list[int], list[int]]],
    names: dict[ModeKeys, set[str]],
    snapshots: dict[Key, tuple[Snapshot, ...]],
    held: HeldTensors,
) -> StepBatch:
    """One scan's news: per mode (in the order the modes first appear), the new mode steps
    and their global steps, sorted by global step; the tags each mode logged; and the
    snapshots ``held`` publishes (under the trial's lock) before the steps are recorded."""

    def publish() -> None:
        by_name: dict[str, list[tuple[ModeKeys, tuple[Snapshot, ...]]]] = {}
        for (mode, tag), snaps in snapshots.items():
            by_name.setdefault(tag, []).append((mode, snaps))
        held.snapshots, held.by_name = snapshots, by_name

    return StepBatch(steps, names, publish)


class HeldTensors:
    """The published columns of a TensorBoard trial: ``(mode, tag) ->`` one snapshot per
    folder of that mode holding the tag, in folder order (a later folder wins a step).
    Answers as a ``ValueStore`` once the trial has given it its ``view`` (``open``)."""

    def __init__(self, phases: Callable[[], bool]) -> None:
        self.snapshots: dict[Key, tuple[Snapshot, ...]] = {}
        self.by_name: dict[str, list[tuple[ModeKeys, tuple[Snapshot, ...]]]] = {}
        self._phases = phases
        self._view: Any = None

    def open(self, view: TrialView) -> HeldTensors:
        self._view = view
        return self

    def close(self) -> None:
        self.snapshots, self.by_name = {}, {}

    def to_global(self, mode: ModeKeys, steps: np.ndarray) -> np.ndarray:
        if not self._phases():
            return steps
        return 2 * steps + (1 if mode == ModeKeys.EVAL else 0)

    def to_writer(self, global_step: int) -> tuple[ModeKeys, int] | None:
        """The mode and logged step of a global step (``to_global``'s inverse); None when
        the run has no phases (its global steps are the logged steps)."""
        if not self._phases():
            return None
        return (ModeKeys.EVAL if global_step % 2 else ModeKeys.TRAIN), global_step // 2

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

    def locate(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> Any:
        """``find``, raising smdebug's exceptions as ``Tensor`` does when there is nothing."""
        view = self._view
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

    def value_of(self, name: str) -> Callable[..., np.ndarray]:
        def value(step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> np.ndarray:
            return self.value(name, step_num, mode, worker)

        return value

    def value(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> np.ndarray:
        snap, row = self.locate(name, step, mode, worker)
        if snap.histogram(row) is not None:
            raise HistogramValueUnavailable(name, step, mode)
        value: np.ndarray = snap.value(row)
        note_read(name, step, value)
        return value

    def histogram(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> Histogram:
        note_read(name, step)
        snap, row = self.locate(name, step, mode, worker)
        found: Histogram | None = snap.histogram(row)
        if found is None:
            raise TensorUnavailableForStep(name, step, mode)
        return found

    def saved_shape(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> tuple[int, ...] | None:
        self.locate(name, step, mode, worker)  # no saved shapes; a missing step raises
        return None

    def reduction_value(
        self, name: str, step: int, how: tuple[str, bool], mode: ModeKeys, worker: str | None
    ) -> Any:
        value = self._reduction(name, step, how, mode, worker)
        note_read(name, step, {how: value})
        return value

    def _reduction(
        self, name: str, step: int, how: tuple[str, bool], mode: ModeKeys, worker: str | None
    ) -> Any:
        """A histogram's reduction as logged (``count`` too), else one computed from the
        value; ``how`` is (reduction name, abs)."""
        snap, row = self.locate(name, step, mode, worker)
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
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> dict[tuple[str, bool], Any]:
        snap, row = self.locate(name, step, mode, worker)
        h = snap.histogram(row)
        found = {} if h is None else {key: np.float64(v) for key, v in h.reductions().items()}
        note_read(name, step, found)
        return found

    def steps(self, name: str, mode: ModeKeys, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which ``name`` was logged: global steps for GLOBAL, else mode steps."""
        with self._view.lock:
            steps: list[int] = self.column_steps(name, mode)[0].tolist()
        return steps

    def workers(self, name: str, step: int, mode: ModeKeys) -> list[str]:
        view = self._view
        with view.lock:
            if self.find(name, step, mode, view.state.global_to_mode):
                return sorted(view.state.worker_set)
        raise TensorUnavailableForStep(name, step, mode)

    def original_name(self, name: str) -> str | None:
        return None

    def whole_column(self, name: str, mode: ModeKeys) -> Column:
        """Every logged step's value, in one array; ``HistogramValueUnavailable`` for a
        histogram, ``TensorUnavailableForStep`` for values that differ in shape or dtype."""
        view = self._view
        view.refresh(name)
        with view.lock:
            steps, values = self.column(name, mode)
        if values is None and steps:
            self.value(name, steps[0], mode, None)  # a histogram's error, else:
            raise TensorUnavailableForStep(name, steps[0], mode)
        if values is None:
            values = np.zeros(0)
        observer = observing()
        if observer is not None:
            for i, s in enumerate(steps):
                observer(name, s, values[i])
        return Column(name, steps, values)

    def columns(
        self, names: list[str], steps: list[int], mode: ModeKeys, max_bytes: int
    ) -> Columns:
        """``Trial.columns`` from the columns held: every step asked is covered; a tensor's
        rows are the asked steps it was logged at, in the order asked (histograms, and values
        that change shape, are left to the per-step API)."""
        wanted = np.array(steps, np.int64)
        columns: dict[str, Column] = {}
        for name in names:
            with self._view.lock:
                have, values = self.column(name, mode)
            if values is None or not have:
                continue
            sorted_steps = np.array(have, np.int64)  # sorted; rows in the asked order
            at = np.minimum(np.searchsorted(sorted_steps, wanted), len(have) - 1)
            found = sorted_steps[at] == wanted
            if found.any():
                columns[name] = Column(name, wanted[found].tolist(), values[at[found]])
        return Columns(list(steps), columns)

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

    def names_at(self, step: int, mode: ModeKeys) -> set[str]:
        """Tags logged at ``step`` of ``mode`` (a global step for GLOBAL)."""
        names = {tag for (m, tag) in self.snapshots if mode is GLOBAL or m == mode}
        to_mode = self._view.state.global_to_mode
        return {n for n in names if self.find(n, step, mode, to_mode) is not None}


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
