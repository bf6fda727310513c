"""``FileValues``: smdebug output's ``ValueStore``, answered from index entries and event files.

Each step's index files (``IndexedState``'s ``FileIndex`` per worker) say where a tensor's value,
its saved reductions and its shape sit in an event file; ``ValueReader`` reads and decodes the
records (one ranged read per event file, cached). The answers and exceptions are smdebug
1.0.34's: the hot path is a GLOBAL read without a worker at a step with one index file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.engine.cache import TrialCache
from evaluator.engine.columns import Column, Columns, read_columns
from evaluator.engine.reads import note_read
from evaluator.engine.runner import BackgroundLoop
from evaluator.engine.view import TrialView
from evaluator.errors import (
    HistogramValueUnavailable,
    InvalidWorker,
    SMDebugRuntimeError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from evaluator.formats.histogram import Histogram, histogram_from_reductions
from evaluator.modes import ModeKeys, StepState
from evaluator.sources.smdebug.entries import FileIndex, StepEntry
from evaluator.sources.smdebug.reader import ValueReader
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.state import IndexedState

__all__ = ["FileValues"]

GLOBAL = ModeKeys.GLOBAL
HISTOGRAM = "histogram"  # a histogram's buckets, saved beside its reductions
_NOT_REDUCTIONS = frozenset({HISTOGRAM, HISTOGRAM + "_stats", "count"})


class FileValues:
    """The values of one smdebug trial, read through its ``ValueReader``."""

    def __init__(
        self, cache: TrialCache, source: SmdebugSource, view: TrialView, loop: BackgroundLoop
    ) -> None:
        storage, uri = source.storage, cache.uri
        self.reader = ValueReader(cache, source, storage, loop, uri=uri)
        self._cache = cache
        self._view = view
        state = view.state
        assert isinstance(state, IndexedState)  # the state SmdebugSource.make_state made
        self._state = state
        # The hot path's lookups, one attribute away (both live as long as the trial).
        self._sole_file = state.sole_file
        self._read_in = self.reader.read_in

    def close(self) -> None:
        self.reader.forget()

    # ---------------------------------------------------------------- step lookup

    def _step(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> StepEntry:
        return self._file(name, step, mode, worker).entry(name)

    def _file(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> FileIndex:
        """The index file of the chosen worker holding ``name`` at ``step``; raises
        smdebug's exceptions when there is none."""
        view = self._view
        files = self._state.files_holding(name, step, mode)
        if files is None:
            view.refresh(name)
            state = view.step_state(step, mode)
            if state == StepState.AVAILABLE:
                files = self._state.files_holding(name, step, mode)
                if files is None:
                    raise TensorUnavailableForStep(name, step, mode)
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

    def value_of(self, name: str) -> Callable[..., np.ndarray]:
        """``Tensor.value`` of ``name``: the reader's ``sole_reader``, its hot path inlined
        (``ValueReader.sole_reader``); anything else goes to ``value``."""
        return self.reader.sole_reader(name, self._sole_file, self.value)

    def value(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> np.ndarray:
        file = self._file(name, step, mode, worker)
        saved = file.location(name)
        if saved is None:
            held = file.reductions.get(name)
            if held is not None and (HISTOGRAM, False) in held:
                raise HistogramValueUnavailable(name, step, mode)
            raise TensorUnavailableForStep(name, step, mode, has_reductions=held is not None)
        value = self.reader.read_value((file.event_key, *saved), what=(name, step, mode))
        note_read(name, step, value)
        return value

    def reduction_value(
        self, name: str, step: int, how: tuple[str, bool], mode: ModeKeys, worker: str | None
    ) -> Any:
        """The saved reduction if the hook saved it, else one computed from the raw tensor."""
        entry = self._step(name, step, mode, worker)
        reader, what = self.reader, (name, step, mode)
        saved = entry.reductions.get(how)
        if saved is not None:
            value = reader.read_value(saved, what=what, layout=(name, *how))
        else:
            location = entry.location
            if location is None:
                raise TensorUnavailableForStep(how[0], step, mode)
            value = reader.computed_reduction(
                location, how[0], how[1], lambda: reader.value_to_reduce(location, what)
            )
        note_read(name, step, {how: value})
        return value

    def reduction_values(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> dict[tuple[str, bool], Any]:
        entry = self._step(name, step, mode, worker)
        reader, what = self.reader, (name, step, mode)
        found = {
            key: reader.read_value(loc, what=what, layout=(name, *key))
            for key, loc in entry.reductions.items()
            if key[0] not in _NOT_REDUCTIONS
        }
        note_read(name, step, found)
        return found

    def histogram(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> Histogram:
        entry = self._step(name, step, mode, worker)
        buckets = entry.reductions.get((HISTOGRAM, False))
        stats = entry.reductions.get((HISTOGRAM + "_stats", False))
        if buckets is None or stats is None:
            raise TensorUnavailableForStep(name, step, mode)
        note_read(name, step)
        reader, what = self.reader, (name, step, mode)
        return histogram_from_reductions(
            {
                "stats": reader.read_value(stats, what=what),
                "buckets": reader.read_value(buckets, what=what),
            }
        )

    def saved_shape(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> tuple[int, ...] | None:
        return self._step(name, step, mode, worker).shape

    # ---------------------------------------------------------------- steps and workers

    def steps(self, name: str, mode: ModeKeys, show_incomplete_steps: bool) -> list[int]:
        view = self._view
        with view.lock:
            record = self._state.record(name)
            assert record is not None
            return self._state.tensor_steps(record, mode, show_incomplete_steps)

    def workers(self, name: str, step: int, mode: ModeKeys) -> list[str]:
        with self._view.lock:
            files = self._state.files_holding(name, step, mode)
            if files is None:
                raise TensorUnavailableForStep(name, step, mode)
            return list(files)

    def original_name(self, name: str) -> str | None:
        with self._view.lock:
            record = self._state.record(name)
        return None if record is None else record.original_name

    def names_at(self, step: int, mode: ModeKeys) -> set[str] | None:
        return None  # the index files' names: the trial state's bookkeeping

    # ---------------------------------------------------------------- batches

    def whole_column(self, name: str, mode: ModeKeys) -> Column | None:
        return None  # read step by step

    def columns(
        self, names: list[str], steps: list[int], mode: ModeKeys, max_bytes: int
    ) -> Columns:
        """A walk through the steps' event files (``read_columns``). It also ends before its
        steps' files outgrow half the byte cache: a rule reads the same steps again right
        after, and then finds their files there instead of reading each once per walk."""
        cache, state = self._cache, self._state

        def file_bytes(step: int) -> int:
            with cache.lock:
                return state.event_bytes(step, mode)

        return read_columns(
            steps,
            names,
            self._raw_reader(mode),
            max_bytes=max_bytes,
            file_bytes=file_bytes if cache.raw.max_bytes else None,
            max_file_bytes=cache.raw.max_bytes // 2,
        )

    def _raw_reader(self, mode: ModeKeys) -> Any:
        """``read(name, step)`` for ``read_columns``: the raw value as ``value`` reads it (the
        first worker's), None where that step's index file holds saved reductions of the
        tensor (``reduction_value`` would use them) or no raw value of it."""
        state, read_in = self._state, self._read_in
        sole_file = state.sole_file
        glob = mode is GLOBAL

        def read(name: str, step: int) -> np.ndarray | None:
            file = sole_file.get(step) if glob else None
            if file is None or name not in file.names:
                files = state.files_holding(name, step, mode)
                if not files:
                    return None
                file = files[min(files)] if len(files) > 1 else next(iter(files.values()))
            if name in file.reductions:
                return None
            i = file.layout.position.get(name)
            if i is None:
                return None
            value: np.ndarray = read_in(file, i, name, step, mode, False)
            return value

        return read
