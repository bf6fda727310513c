"""``Tensor``: smdebug's Tensor API (values, reductions, shapes, steps, workers) for one name."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.errors import (
    InvalidWorker,
    SMDebugNotImplementedError,
    SMDebugRuntimeError,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.modes import ModeKeys, StepState
from evaluator.trial.reads import note_read
from evaluator.trial.state import FileIndex, StepEntry, TensorRecord, holding

if TYPE_CHECKING:
    from evaluator.trial.trial import Trial

__all__ = ["Tensor"]

GLOBAL = ModeKeys.GLOBAL


class Tensor:
    """One saved tensor of a trial. Get it with ``trial.tensor(name)``."""

    def __init__(self, name: str, trial: Trial, cache: bool = False) -> None:
        self.name = name
        self.trial = trial
        self.cache = cache
        self._view: TensorRecord | None = None

    def __repr__(self) -> str:
        return f"<Tensor name={self.name!r} trial={self.trial.name!r}>"

    @property
    def _record(self) -> TensorRecord:
        """Every step this tensor was saved at, made on first need (steps(), workers() …):
        reading a value does not need it."""
        if self._view is None:
            with self.trial._cache.lock:
                self._view = self.trial._state.record(self.name)
            assert self._view is not None
        return self._view

    @property
    def original_name(self) -> str | None:
        return self._record.original_name

    # ---------------------------------------------------------------- step lookup

    def _files(self, step: int, mode: ModeKeys) -> dict[str, FileIndex] | None:
        """The index files (by worker) that hold this tensor at ``step`` of ``mode``."""
        files_at = self.trial._state.files_at
        if mode == GLOBAL:
            found = holding(files_at.get((GLOBAL, step)), self.name)
            if found:
                return found
            m, ms = self.trial.mode_modestep(step)
            if m is None or ms is None:
                return None
            return holding(files_at.get((m, ms)), self.name)
        return holding(files_at.get((mode, step)), self.name)

    def _step(self, step: int, mode: ModeKeys, worker: str | None) -> StepEntry:
        return self._file(step, mode, worker).entry(self.name)

    def _file(self, step: int, mode: ModeKeys, worker: str | None) -> FileIndex:
        """The index file of the chosen worker holding this tensor at ``step``; raises
        smdebug's exceptions when there is none."""
        files = self._files(step, mode)
        if files is None:
            self.trial.maybe_refresh(self.name)
            state = self.trial.has_passed_step(step, mode)
            if state == StepState.AVAILABLE:
                files = self._files(step, mode)
                if files is None:
                    raise TensorUnavailableForStep(self.name, step, mode)
            elif state == StepState.UNAVAILABLE:
                raise StepUnavailable(step, mode)
            else:
                raise StepNotYetAvailable(step, mode)
        if worker is None:
            if not files:
                raise SMDebugRuntimeError("No workers are available")
            return files[min(files)] if len(files) > 1 else next(iter(files.values()))
        found = files.get(worker)
        if found is None:
            raise InvalidWorker(worker)
        return found

    # ---------------------------------------------------------------- values

    def value(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> np.ndarray:
        """The saved array at ``step_num`` (a global step for GLOBAL, else a mode step).

        With no ``worker``, the lexically first worker that saved the step is used.
        """
        file = self._file(step_num, mode, worker)
        saved = file.tensors.get(self.name)
        if saved is None:
            raise TensorUnavailableForStep(self.name, step_num, mode,
                                           has_reductions=self.name in file.reductions)
        note_read(self.name, step_num)
        return self.trial._reader.read_value(file.event_key, saved.start_idx, saved.length,
                                      self.name, step_num, mode)

    def reduction_value(self, step_num: int, reduction_name: str, mode: ModeKeys = GLOBAL,
                        worker: str | None = None, abs: bool = False) -> Any:
        """A reduction (min, max, mean, std, variance, sum, prod, l1, l2) at ``step_num``:
        the saved one if the hook saved it, else computed from the raw tensor."""
        entry = self._step(step_num, mode, worker)
        note_read(self.name, step_num)
        saved = entry.reductions.get((reduction_name, abs))
        if saved is not None:
            return self.trial._reader.read_value(*saved, self.name, step_num, mode)
        location = entry.location
        if location is None:
            raise TensorUnavailableForStep(reduction_name, step_num, mode)
        return self.trial._reader.computed_reduction(
            location, reduction_name, abs,
            lambda: self.trial._reader.read_value(*location, self.name, step_num, mode))

    def reduction_values(self, step_num: int, mode: ModeKeys = GLOBAL,
                         worker: str | None = None) -> dict[tuple[str, bool], Any]:
        """Every *saved* reduction at ``step_num``, keyed by ``(name, abs)``."""
        entry = self._step(step_num, mode, worker)
        note_read(self.name, step_num)
        return {key: self.trial._reader.read_value(*loc, self.name, step_num, mode)
                for key, loc in entry.reductions.items()}

    def shape(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The saved shape, else the shape of the saved value."""
        entry = self._step(step_num, mode, worker)
        if entry.shape is not None:
            return entry.shape
        try:
            return self.value(step_num, mode=mode, worker=worker).shape
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode) from None

    def values(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def shapes(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, tuple[int, ...]]:
        """``{step: shape}`` over ``steps(mode)``: documented by smdebug, missing from it."""
        return {s: self.shape(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def step(self, *args: Any, **kwargs: Any) -> None:
        raise SMDebugNotImplementedError(
            "step method has been removed. Please use tensor.value or tensor.reduction_value methods"
        )

    # ---------------------------------------------------------------- steps and workers

    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor was saved: global steps for GLOBAL, else mode steps."""
        self.trial.maybe_refresh(self.name)
        with self.trial._cache.lock:
            return self.trial._state.tensor_steps(self._record, mode, show_incomplete_steps)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = GLOBAL) -> list[int]:
        """Completed steps up to and including ``step``; the last ``n`` of them if ``n``."""
        steps = self.steps(mode=mode)
        found = steps[: bisect.bisect_right(steps, step)]
        return found[-n:] if n else found

    def workers(self, step_num: int, mode: ModeKeys = GLOBAL) -> list[str]:
        """Workers that saved this tensor at ``step_num``, in the order their files were read."""
        record = self._record
        files = record.files(mode, step_num)
        if files is None and mode == GLOBAL:
            found = self.trial._state.global_to_mode.get(step_num)
            if found is not None:
                files = record.files(*found)
        if files is None:
            raise TensorUnavailableForStep(self.name, step_num, mode)
        with self.trial._cache.lock:
            return list(files)
