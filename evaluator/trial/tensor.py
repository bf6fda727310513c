"""``Tensor``: smdebug's Tensor API (values, reductions, shapes, steps, workers) for one name."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from evaluator.errors import (
    HistogramValueUnavailable,
    InvalidWorker,
    ShapeUnavailableForStep,
    SMDebugNotImplementedError,
    SMDebugRuntimeError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.formats.tb_summary import Histogram, histogram_from_reductions
from evaluator.modes import ModeKeys, StepState
from evaluator.trial.columns import Column
from evaluator.trial.entries import FileIndex, StepEntry, TensorRecord
from evaluator.trial.reads import note_read, observing
from evaluator.trial.view import TrialView

if TYPE_CHECKING:
    from evaluator.trial.columns import Column
    from evaluator.trial.trial import Trial

__all__ = ["Tensor"]

GLOBAL = ModeKeys.GLOBAL
HISTOGRAM = "histogram"  # a TensorBoard histogram's buckets, saved beside its reductions
MiB = 1024 * 1024
_NOT_REDUCTIONS = frozenset({HISTOGRAM, HISTOGRAM + "_stats", "count"})


class Tensor:
    """One saved tensor of a trial. Get it with ``trial.tensor(name)``.

    ``trial`` is kept for smdebug's ``tensor.trial``; everything else goes through ``view``, the
    part of the trial a Tensor may use."""

    def __init__(self, name: str, trial: Trial, cache: bool = False, *, view: TrialView) -> None:
        self.name = name
        self.trial = trial
        self.cache = cache
        self._view = view
        self._record_made: TensorRecord | None = None
        # The hot path's lookups, one attribute away (both live as long as the trial).
        self._sole_file = view.state.sole_file
        self._read_in = view.reader.read_in
        self._held = view.held  # a TensorBoard trial's columns: they answer (held_values)

    def __repr__(self) -> str:
        return f"<Tensor name={self.name!r} trial={self.trial.name!r}>"

    @property
    def _record(self) -> TensorRecord:
        """Every step this tensor was saved at, made on first need (steps(), original_name):
        reading a value does not need it."""
        if self._record_made is None:
            with self._view.lock:
                self._record_made = self._view.state.record(self.name)
            assert self._record_made is not None
        return self._record_made

    @property
    def original_name(self) -> str | None:
        return self._record.original_name

    # ---------------------------------------------------------------- step lookup

    def _step(self, step: int, mode: ModeKeys, worker: str | None) -> StepEntry:
        return self._file(step, mode, worker).entry(self.name)

    def _file(self, step: int, mode: ModeKeys, worker: str | None) -> FileIndex:
        """The index file of the chosen worker holding this tensor at ``step``; raises
        smdebug's exceptions when there is none."""
        view = self._view
        files = view.state.files_holding(self.name, step, mode)
        if files is None:
            view.refresh(self.name)
            state = view.step_state(step, mode)
            if state == StepState.AVAILABLE:
                files = view.state.files_holding(self.name, step, mode)
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

    def value(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> np.ndarray:
        """The saved array at ``step_num`` (a global step for GLOBAL, else a mode step).

        With no ``worker``, the lexically first worker that saved the step is used.
        """
        if mode is GLOBAL and worker is None:
            # The hot path: a step with one index file (one worker), holding the tensor.
            sole = self._sole_file.get(step_num)
            if sole is not None:
                name = self.name
                i = sole.layout.position.get(name)
                if i is not None:
                    value = self._read_in(sole, i, name, step_num, mode)
                    observer = observing()  # note_read, inlined
                    if observer is not None:
                        observer(name, step_num, value)
                    return value
        if self._held is not None:
            value = self._held.value(self._view, self.name, step_num, mode, worker)
            note_read(self.name, step_num, value)
            return value
        file = self._file(step_num, mode, worker)
        saved = file.location(self.name)
        if saved is None:
            held = file.reductions.get(self.name)
            if held is not None and (HISTOGRAM, False) in held:
                raise HistogramValueUnavailable(self.name, step_num, mode)
            raise TensorUnavailableForStep(
                self.name, step_num, mode, has_reductions=held is not None
            )
        value = self._view.reader.read_value(
            (file.event_key, *saved), what=(self.name, step_num, mode)
        )
        note_read(self.name, step_num, value)
        return value

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> Any:
        """A reduction (min, max, mean, std, variance, sum, prod, l1, l2) at ``step_num``:
        the saved one if the hook saved it, else computed from the raw tensor."""
        how = (reduction_name, abs)
        if self._held is not None:
            value = self._held.reduction_value(self._view, self.name, step_num, mode, worker, how)
            note_read(self.name, step_num, {how: value})
            return value
        entry = self._step(step_num, mode, worker)
        reader, what = self._view.reader, (self.name, step_num, mode)
        saved = entry.reductions.get(how)
        if saved is not None:
            value = reader.read_value(saved, what=what, layout=(self.name, reduction_name, abs))
        else:
            location = entry.location
            if location is None:
                raise TensorUnavailableForStep(reduction_name, step_num, mode)
            value = reader.computed_reduction(
                location,
                reduction_name,
                abs,
                lambda: reader.value_to_reduce(location, what),
            )
        note_read(self.name, step_num, {how: value})
        return value

    def reduction_values(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], Any]:
        """Every *saved* reduction at ``step_num``, keyed by ``(name, abs)`` (a TensorBoard
        histogram's buckets and count are not reductions: see ``histogram``)."""
        if self._held is not None:
            found = self._held.reduction_values(self._view, self.name, step_num, mode, worker)
        else:
            entry = self._step(step_num, mode, worker)
            reader, what = self._view.reader, (self.name, step_num, mode)
            found = {
                key: reader.read_value(loc, what=what, layout=(self.name, *key))
                for key, loc in entry.reductions.items()
                if key[0] not in _NOT_REDUCTIONS
            }
        note_read(self.name, step_num, found)
        return found

    def histogram(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> Histogram:
        """Ours, for TensorBoard histograms: the logged histogram at ``step_num`` (its exact
        ``min``, ``max``, ``count``, ``sum`` and ``sum_squares`` where logged, and its
        ``buckets``, ``[k, 3]`` rows of left edge, right edge, count; see
        ``evaluator.formats.tb_summary.Histogram`` for the reductions and their error bound).
        ``TensorUnavailableForStep`` when the tensor is not a histogram there."""
        if self._held is not None:
            note_read(self.name, step_num)
            return self._held.histogram(self._view, self.name, step_num, mode, worker)
        entry = self._step(step_num, mode, worker)
        buckets = entry.reductions.get((HISTOGRAM, False))
        stats = entry.reductions.get((HISTOGRAM + "_stats", False))
        if buckets is None or stats is None:
            raise TensorUnavailableForStep(self.name, step_num, mode)
        note_read(self.name, step_num)
        reader, what = self._view.reader, (self.name, step_num, mode)
        return histogram_from_reductions(
            {
                "stats": reader.read_value(stats, what=what),
                "buckets": reader.read_value(buckets, what=what),
            }
        )

    def shape(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> tuple[int, ...]:
        """The saved shape, else the shape of the saved value."""
        if self._held is not None:  # no saved shapes; a missing step raises as ``_step``
            self._held.locate(self._view, self.name, step_num, mode, worker)
        else:
            entry = self._step(step_num, mode, worker)
            if entry.shape is not None:
                return entry.shape
        try:
            return self.value(step_num, mode=mode, worker=worker).shape
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode) from None

    def values(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    @overload
    def column(
        self, steps: None = None, mode: ModeKeys = GLOBAL, *, max_bytes: int = ...
    ) -> Column: ...
    @overload
    def column(
        self, steps: Iterable[int], mode: ModeKeys = GLOBAL, *, max_bytes: int = ...
    ) -> Column | None: ...
    def column(
        self,
        steps: Iterable[int] | None = None,
        mode: ModeKeys = GLOBAL,
        *,
        max_bytes: int = 16 * MiB,
    ) -> Column | None:
        """Ours: the batch read of this tensor, values stacked in one array (``Column``:
        ``values[i]`` is the value at ``steps[i]``).

        Without ``steps``: every step of ``mode`` (as ``steps(mode)``); a TensorBoard trial
        answers from the columns it holds, in one call; smdebug output is read step by step.
        ``HistogramValueUnavailable`` for a histogram (use ``histogram``), and
        ``TensorUnavailableForStep`` when the values differ in shape or dtype.

        With ``steps``: ``Trial.columns([name], steps, mode)``'s ``Column``, the values over a
        prefix of ``steps`` (up to ``max_bytes`` of them) read in one walk through the event
        files; None when no step gave a raw value (``evaluator.trial.columns`` says which
        steps are left out, and how reads are counted)."""
        if steps is not None:
            found = self.trial.columns([self.name], steps, mode, max_bytes=max_bytes)
            return found.get(self.name)
        if self._held is not None:
            self._view.refresh(self.name)
            with self._view.lock:
                steps, values = self._held.column(self.name, mode)
            if values is None and steps:
                self.value(steps[0], mode)  # a histogram's error, else:
                raise TensorUnavailableForStep(self.name, steps[0], mode)
            if values is None:
                values = np.zeros(0)
            observer = observing()
            if observer is not None:
                for i, s in enumerate(steps):
                    observer(self.name, s, values[i])
            return Column(self.name, steps, values)
        read = {s: self.value(s, mode=mode) for s in self.steps(mode=mode)}
        arrays = list(read.values())
        if any(a.shape != arrays[0].shape or a.dtype != arrays[0].dtype for a in arrays):
            raise TensorUnavailableForStep(self.name, next(iter(read)), mode)
        return Column(self.name, list(read), np.stack(arrays) if arrays else np.zeros(0))

    def shapes(
        self, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> dict[int, tuple[int, ...]]:
        """``{step: shape}`` over ``steps(mode)``: documented by smdebug, missing from it."""
        return {s: self.shape(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def step(self, *args: Any, **kwargs: Any) -> None:
        raise SMDebugNotImplementedError(
            "step method has been removed. "
            "Please use tensor.value or tensor.reduction_value methods"
        )

    # ---------------------------------------------------------------- steps and workers

    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor was saved: global steps for GLOBAL, else mode steps."""
        self._view.refresh(self.name)
        if self._held is not None:
            with self._view.lock:
                return self._held.steps(self.name, mode)
        with self._view.lock:
            return self._view.state.tensor_steps(self._record, mode, show_incomplete_steps)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = GLOBAL) -> list[int]:
        """Completed steps up to and including ``step``; the last ``n`` of them if ``n``."""
        steps = self.steps(mode=mode)
        found = steps[: bisect.bisect_right(steps, step)]
        return found[-n:] if n else found

    def workers(self, step_num: int, mode: ModeKeys = GLOBAL) -> list[str]:
        """Workers that saved this tensor at ``step_num``, in the order their files were read."""
        if self._held is not None:
            with self._view.lock:
                if self._held.find(self.name, step_num, mode, self._view.state.global_to_mode):
                    return sorted(self._view.state.worker_set)
            raise TensorUnavailableForStep(self.name, step_num, mode)
        with self._view.lock:
            files = self._view.state.files_holding(self.name, step_num, mode)
            if files is None:
                raise TensorUnavailableForStep(self.name, step_num, mode)
            return list(files)
