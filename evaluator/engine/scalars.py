"""``ScalarValues``: a ``ValueStore`` over scalar series held in memory, for simple formats.

Formats whose data is a few scalar series per run (a CSV of ``step,tag,value``, a metrics
history) need not write a store of their own: the source keeps one ``ScalarValues``, and each
scan hands the trial ``ScalarValues.batch(series)``, a ``StepBatch`` whose ``publish`` makes
the new series the ones read. Series are keyed ``(mode, name)`` and hold sorted mode steps and
their float64 values; for GLOBAL a step is a global step, found through the trial's state.
Answers and exceptions are those of smdebug output: a value is a 0-d float64 array,
reductions are computed from it, there are no histograms, saved shapes or other workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.engine.columns import Column, Columns, read_columns
from evaluator.engine.reads import note_read
from evaluator.engine.reductions import compute_reduction
from evaluator.engine.source import StepBatch
from evaluator.errors import (
    InvalidWorker,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.modes import ModeKeys, StepState

if TYPE_CHECKING:
    from evaluator.engine.view import TrialView
    from evaluator.formats.histogram import Histogram

__all__ = ["WORKER", "ScalarValues", "Series"]

GLOBAL = ModeKeys.GLOBAL
WORKER = "worker_0"
Series = dict[tuple[ModeKeys, str], tuple[np.ndarray, np.ndarray]]  # -> (steps, values)


class ScalarValues:
    """The published scalar series of one trial; open it with the trial's view first."""

    def __init__(self) -> None:
        self.series: Series = {}
        self._view: Any = None

    def open(self, view: TrialView) -> ScalarValues:
        self._view = view
        return self

    def close(self) -> None:
        self.series = {}

    def batch(
        self,
        series: Series,
        to_global: Callable[[ModeKeys, np.ndarray], np.ndarray] | None = None,
    ) -> StepBatch:
        """The ``StepBatch`` of a scan: ``series`` (every series, old and new, as they stand
        now) to publish, and the mode steps not handed on before with their global steps,
        ``to_global(mode, steps)`` (default: a step is its own global step, as for a format
        of GLOBAL steps only)."""
        known = self._handed_on()
        steps: list[tuple[ModeKeys, list[int], list[int]]] = []
        names: dict[ModeKeys, set[str]] = {}
        for mode, every in _mode_steps(series).items():
            before = known.get(mode)
            new = every if before is None else every[~np.isin(every, before)]
            if len(new):
                g = new if to_global is None else to_global(mode, new)
                steps.append((mode, new.tolist(), g.tolist()))
            names[mode] = {name for m, name in series if m == mode}
        steps.sort(key=lambda s: s[2][0])

        def publish() -> None:
            self.series = series

        return StepBatch(steps, names, publish)

    def _handed_on(self) -> dict[ModeKeys, np.ndarray]:
        return _mode_steps(self.series)

    # ---------------------------------------------------------------- lookups

    def _find(self, name: str, step: int, mode: ModeKeys) -> float | None:
        if mode is GLOBAL:
            key = self._view.state.global_to_mode.get(step)
            if key is None:
                return None
            mode, step = key
        found = self.series.get((mode, name))
        if found is None:
            return None
        steps, values = found
        i = int(np.searchsorted(steps, step))
        return float(values[i]) if i < len(steps) and steps[i] == step else None

    def _locate(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> float:
        """The value of ``name`` at ``step``, raising smdebug's exceptions when there is none."""
        found = self._find(name, step, mode)
        if found is None:
            view = self._view
            view.refresh(name)
            state = view.step_state(step, mode)
            found = self._find(name, step, mode)
            if found is None:
                if state == StepState.AVAILABLE:
                    raise TensorUnavailableForStep(name, step, mode)
                if state == StepState.UNAVAILABLE:
                    raise StepUnavailable(step, mode)
                raise StepNotYetAvailable(step, mode)
        if worker is not None and worker != WORKER:
            raise InvalidWorker(worker)
        return found

    # ---------------------------------------------------------------- the ValueStore

    def value_of(self, name: str) -> Callable[..., np.ndarray]:
        def value(step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> np.ndarray:
            return self.value(name, step_num, mode, worker)

        return value

    def value(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> np.ndarray:
        value = np.array(self._locate(name, step, mode, worker), np.float64)
        note_read(name, step, value)
        return value

    def reduction_value(
        self, name: str, step: int, how: tuple[str, bool], mode: ModeKeys, worker: str | None
    ) -> Any:
        value = np.array(self._locate(name, step, mode, worker), np.float64)
        found = compute_reduction(value, how[0], how[1])
        note_read(name, step, {how: found})
        return found

    def reduction_values(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> dict[tuple[str, bool], Any]:
        self._locate(name, step, mode, worker)
        return {}  # none saved

    def histogram(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> Histogram:
        self._locate(name, step, mode, worker)
        raise TensorUnavailableForStep(name, step, mode)

    def saved_shape(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> tuple[int, ...] | None:
        self._locate(name, step, mode, worker)
        return None

    def steps(self, name: str, mode: ModeKeys, show_incomplete_steps: bool) -> list[int]:
        view = self._view
        with view.lock:
            if mode is not GLOBAL:
                found = self.series.get((mode, name))
                return [] if found is None else found[0].tolist()
            table = view.state.mode_to_global
            every: set[int] = set()
            for (m, n), (steps, _) in self.series.items():
                if n == name:
                    to_global = table.get(m, {}) if m is not GLOBAL else None
                    every.update(
                        steps.tolist() if to_global is None else map(to_global.get, steps.tolist())
                    )
            return sorted(every)

    def workers(self, name: str, step: int, mode: ModeKeys) -> list[str]:
        with self._view.lock:
            if self._find(name, step, mode) is not None:
                return [WORKER]
        raise TensorUnavailableForStep(name, step, mode)

    def original_name(self, name: str) -> str | None:
        return None

    def whole_column(self, name: str, mode: ModeKeys) -> Column | None:
        return None  # read step by step

    def columns(
        self, names: list[str], steps: list[int], mode: ModeKeys, max_bytes: int
    ) -> Columns:
        def read(name: str, step: int) -> np.ndarray | None:
            found = self._find(name, step, mode)
            return None if found is None else np.array(found, np.float64)

        with self._view.lock:
            return read_columns(steps, names, read, max_bytes=max_bytes)

    def names_at(self, step: int, mode: ModeKeys) -> set[str]:
        return {
            n
            for (m, n) in self.series
            if (mode is GLOBAL or m == mode) and self._find(n, step, mode) is not None
        }


def _mode_steps(series: Series) -> dict[ModeKeys, np.ndarray]:
    """Every mode's sorted union of steps."""
    parts: dict[ModeKeys, list[np.ndarray]] = {}
    for (mode, _), (steps, _) in series.items():
        parts.setdefault(mode, []).append(steps)
    return {m: np.unique(np.concatenate(p)) for m, p in parts.items()}
