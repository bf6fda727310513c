"""What is known about a trial: steps, modes, workers and names, in no format's terms. No I/O.

``TrialState`` answers the bookkeeping questions of smdebug's Trial (``steps``,
``has_passed_step``, ``mode_modestep`` …) with smdebug 1.0.34's semantics. A format's scans fill
it: ``apply_news`` takes a scan's ``StepBatch`` (``apply_steps``); a format with news of its
own (smdebug's index files: ``evaluator.sources.smdebug.state.IndexedState``) subclasses it.
The facade in ``trial.py`` owns I/O and refreshing; this module owns the decision tables, so
they can be tested without any files.
"""

from __future__ import annotations

import bisect
from collections.abc import Set as AbstractSet
from itertools import repeat
from typing import Any

from evaluator.engine.source import StepBatch
from evaluator.modes import ModeKeys, StepState

__all__ = ["TrialState"]

_GLOBAL = ModeKeys.GLOBAL


class TrialState:
    """The trial cache's index: a single owner of steps, modes, workers and names."""

    def __init__(
        self,
        *,
        num_workers: int,
        workers: set[str],
        incomplete_step_window: int = 1000,
        range_steps: tuple[int | None, int | None] | None = None,
    ) -> None:
        self.num_workers = num_workers
        self.worker_set = set(workers)
        self.window = incomplete_step_window
        self.range_steps = range_steps
        self.names: set[str] = set()  # every tensor name seen
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.global_step_to_tensors: dict[int, AbstractSet[str]] = {}
        self.mode_to_tensors: dict[ModeKeys, set[str]] = {}
        self.workers_for_global_step: dict[int, AbstractSet[str]] = {}
        self._one_worker: dict[str, frozenset[str]] = {}
        self.last_complete_step = -1
        self.last_index_token: str | None = None
        self.loaded_all_steps = False
        self._sorted: dict[ModeKeys, list[int]] = {}

    # ---------------------------------------------------------------- filling

    def apply_news(self, step: int, worker: str, news: Any) -> None:
        """Record one item of a scan (``ParsedIndex``): a ``StepBatch`` here; a format whose
        scans bring news of their own overrides this."""
        if not isinstance(news, StepBatch):
            raise TypeError(f"{type(self).__name__} records StepBatch news, got {type(news)}")
        self.apply_steps(news, worker)

    def apply_steps(self, batch: StepBatch, worker: str) -> None:
        """Record a scan's new steps at once, in no format's terms (their values are the
        source's ``ValueStore``'s, published first; no index file per step)."""
        batch.publish()
        workers = self._one_worker.get(worker)
        if workers is None:
            workers = self._one_worker[worker] = frozenset((worker,))
        for names in batch.names.values():
            self.names.update(names)
        for mode, mode_steps, global_steps in batch.steps:
            if mode is not _GLOBAL:
                table = self.mode_to_global.setdefault(mode, {})
                table.update(zip(mode_steps, global_steps, strict=True))
                self._sorted.pop(mode, None)
                self.mode_to_tensors.setdefault(mode, set()).update(batch.names.get(mode, ()))
            # Steps are new, and a global step names one (mode, step) of such a source.
            self.global_to_mode.update(zip(global_steps, zip(repeat(mode), mode_steps)))
            self.workers_for_global_step.update(dict.fromkeys(global_steps, workers))
            self._sorted.pop(_GLOBAL, None)
            if len(workers) == self.num_workers and global_steps:
                self.last_complete_step = max(self.last_complete_step, global_steps[-1])

    def _interned(self, names: frozenset[str]) -> AbstractSet[str]:
        """One name set for equal ones (a subclass may share them between steps)."""
        return names

    def _note_step(
        self, names: AbstractSet[str], step: int, worker: str, mode: ModeKeys, mode_step: int
    ) -> None:
        if mode != ModeKeys.GLOBAL:
            steps = self.mode_to_global.get(mode)
            if steps is None:
                steps = self.mode_to_global[mode] = {}
            if mode_step not in steps:
                steps[mode_step] = step
                self._sorted.pop(mode, None)
            self.mode_to_tensors.setdefault(mode, set()).update(names)
        if step not in self.global_to_mode:
            self.global_to_mode[step] = (mode, mode_step)
            self._sorted.pop(ModeKeys.GLOBAL, None)
        known = self.global_step_to_tensors.get(step)
        if known is None:
            self.global_step_to_tensors[step] = names
        elif not names <= known:
            self.global_step_to_tensors[step] = self._interned(frozenset(known | names))
        workers = self.workers_for_global_step.get(step)
        if workers is None:
            workers = self._one_worker.get(worker)
            if workers is None:
                workers = self._one_worker[worker] = frozenset((worker,))
            self.workers_for_global_step[step] = workers
        elif worker not in workers:
            workers = self.workers_for_global_step[step] = frozenset((*workers, worker))
        if len(workers) == self.num_workers and step > self.last_complete_step:
            self.last_complete_step = step

    def update_index_token(self, new_token: str | None) -> None:
        """Remember where a scan's listing ended (a format's own scans may ignore it)."""
        if new_token:
            self.last_index_token = new_token

    def mark_all_loaded(self) -> None:
        """Training has ended and the last files were read: every step counts as complete."""
        self.loaded_all_steps = True
        if self.global_to_mode:
            self.last_complete_step = max(self.global_to_mode)

    # ---------------------------------------------------------------- questions

    def all_steps(self, mode: ModeKeys) -> list[int]:
        """Sorted steps of ``mode`` (global steps for GLOBAL), complete or not. Do not mutate."""
        cached = self._sorted.get(mode)
        if cached is None:
            source = (
                self.global_to_mode
                if mode == ModeKeys.GLOBAL
                else self.mode_to_global.get(mode, {})
            )
            cached = self._sorted[mode] = sorted(source)
        return cached

    def to_global(self, mode: ModeKeys, step: int) -> int | None:
        if mode == ModeKeys.GLOBAL:
            return step
        return self.mode_to_global.get(mode, {}).get(step)

    def _known_global(self, mode: ModeKeys, step: int) -> int:
        """The global step of a step of ``mode`` that is known to exist."""
        return step if mode is _GLOBAL else self.mode_to_global[mode][step]

    def is_complete(self, global_step: int) -> bool:
        return (
            self.loaded_all_steps
            or self.last_complete_step >= global_step
            or len(self.workers_for_global_step.get(global_step, ())) == self.num_workers
        )

    def steps(self, mode: ModeKeys, show_incomplete_steps: bool = False) -> list[int]:
        every = self.all_steps(mode)
        if show_incomplete_steps or self.loaded_all_steps:
            return list(every)
        return [s for s in every if self.is_complete(self._known_global(mode, s))]

    def readable_now(self, step: int) -> bool:
        """A quick yes for ``has_passed_step(step, GLOBAL) == AVAILABLE`` in the usual cases
        (a known step of a complete trial, or one every worker has saved); False means ask
        ``has_passed_step``. Safe without the lock: it only reads, and each read is atomic."""
        workers = self.workers_for_global_step.get(step)
        return workers is not None and (self.loaded_all_steps or len(workers) == self.num_workers)

    def has_passed_step(self, step: int, mode: ModeKeys) -> StepState:
        """smdebug's decision table: is ``step`` of ``mode`` readable, skipped, or still to come?"""
        every = self.all_steps(mode)
        i = bisect.bisect_left(every, step)
        if i < len(every):
            g = self._known_global(mode, every[i])
            if every[i] > step:
                # A later step exists: ``step`` was skipped once that later step is complete.
                if self.last_complete_step >= g:
                    return StepState.UNAVAILABLE
                return StepState.NOT_YET_AVAILABLE
            if len(self.workers_for_global_step[g]) == self.num_workers:
                return StepState.AVAILABLE
            if self.loaded_all_steps or g <= self.last_complete_step:
                return StepState.AVAILABLE
            return StepState.NOT_YET_AVAILABLE
        return StepState.UNAVAILABLE if self.loaded_all_steps else StepState.NOT_YET_AVAILABLE
