"""What is known about a trial: steps, modes, workers and where every tensor lives. No I/O.

``TrialState`` is filled from parsed index files (``apply_index_file``) and answers the
bookkeeping questions of smdebug's Trial (``steps``, ``has_passed_step``, ``mode_modestep`` …)
with smdebug 1.0.34's semantics. The facade in ``trial.py`` owns I/O and refreshing; this module
owns the decision tables, so they can be tested without any files.

Each index file is kept as one ``FileIndex`` (its entries in dicts built in C), and per-tensor
views (``TensorRecord``) are made only for tensors somebody asks about: a trial of 2000 steps x
50 tensors loads without creating 100,000 Python objects.
"""

from __future__ import annotations

import bisect
from collections.abc import Set as AbstractSet
from itertools import repeat

from evaluator.engine.entries import FileIndex, Layouts, TensorRecord, holding
from evaluator.engine.source import StepBatch
from evaluator.errors import SMDebugValueError
from evaluator.formats.index_file import IndexColumns, IndexFile
from evaluator.formats.keys import (
    index_key,
    serialize_tf_device,
)
from evaluator.modes import ModeKeys, StepState

__all__ = ["TrialState"]

_GLOBAL = ModeKeys.GLOBAL


class TrialState:
    """The trial cache's index: a single owner of steps, modes, workers and tensor locations."""

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
        self._merged_names: set[AbstractSet[str]] = set()  # name sets already in ``names``
        self.files_at: dict[tuple[ModeKeys, int], dict[str, FileIndex]] = {}
        # Name sets below are shared between steps (``layouts``) and replaced, never changed.
        self.layouts = Layouts()
        self.names_at: dict[tuple[ModeKeys, int], AbstractSet[str]] = {}  # union, key's files
        self._files_with_shapes: list[FileIndex] = []
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.global_step_to_tensors: dict[int, AbstractSet[str]] = {}
        self.mode_to_tensors: dict[ModeKeys, set[str]] = {}
        self.workers_for_global_step: dict[int, AbstractSet[str]] = {}
        self._one_worker: dict[str, frozenset[str]] = {}
        self.event_spans: dict[str, tuple[int, int]] = {}  # event key -> byte span of its records
        # Global step -> the one index file a GLOBAL read without a worker uses there, for
        # steps where that file is the only candidate (one worker, one mode): the hot path of
        # ``Tensor.value``. Steps with more files are answered by ``files_holding``.
        self.sole_file: dict[int, FileIndex] = {}
        self.last_complete_step = -1
        self.last_index_token: str | None = None
        self.loaded_all_steps = False
        self._records: dict[str, TensorRecord] = {}
        self._sorted: dict[ModeKeys, list[int]] = {}

    # ---------------------------------------------------------------- filling

    def apply_index_file(
        self, step: int, worker: str, index: IndexFile | IndexColumns | StepBatch
    ) -> None:
        """Record one parsed index file written by ``worker`` at ``step``.

        Mode and mode step come from the file's ``meta`` (smdebug ignores the records' own).
        Unlike smdebug, a shape entry does not erase the raw-tensor location of the same name
        in the same file: both are kept (docs/compatibility.md).
        """
        if isinstance(index, StepBatch):
            self.apply_steps(index, worker)
            return
        listed = index.names if isinstance(index, IndexColumns) else index.tensors
        if not listed and not index.shapes:
            return
        meta = index.meta
        if meta.mode_step < 0:
            first = (
                index.names[0]
                if isinstance(index, IndexColumns) and listed
                else ((index.tensors or index.shapes)[0].tensorname)
            )
            raise SMDebugValueError(
                f"mode step number {meta.mode_step} for tensor {first} can not be less than 0"
            )
        new = FileIndex(step, worker, index, self.layouts)
        key = (new.mode, new.mode_step)
        files = self.files_at.get(key)
        if files is None:
            files = self.files_at[key] = {}
        previous = files.get(worker)
        if previous is not None:
            previous.merge(new)
            new = previous
        else:
            files[worker] = new
        if new.starts:
            self._note_span(new)
        if new.shapes and (not self._files_with_shapes or self._files_with_shapes[-1] is not new):
            self._files_with_shapes.append(new)
        if new.names not in self._merged_names:  # most steps share one interned name set
            self.names.update(new.names)
            if len(self._merged_names) < 4096:
                self._merged_names.add(new.names)
        names_here = self.names_at.get(key)
        if names_here is None:
            self.names_at[key] = new.names
        elif not new.names <= names_here:
            self.names_at[key] = self.layouts.name_set(frozenset(names_here | new.names))
        for name, record in self._records.items():
            # Re-check records that share this step's worker map, not only those in the file:
            # the map just gained a worker that may not have saved them.
            if name in new.names or record.files(new.mode, new.mode_step) is not None:
                record.add(new.mode, new.mode_step, files)
        self._note_step(new.names, step, worker, new.mode, new.mode_step)
        # Every sole file this step's map may have served is looked at again: a map that
        # gains a second worker has no sole file any more, wherever it was one.
        for f in files.values() if len(files) > 1 else (new,):
            self._note_sole_file(f.step)
            if f.mode is _GLOBAL and f.mode_step != f.step:
                self._note_sole_file(f.mode_step)

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

    def _note_sole_file(self, step: int) -> None:
        """Keep ``sole_file`` of global ``step`` true to ``files_holding``: the GLOBAL files of
        that step and those of its mode step must be one and the same single file."""
        direct = self.files_at.get((_GLOBAL, step))
        key = self.global_to_mode.get(step)
        files = None if key is None else self.files_at.get(key)
        if files is not None and len(files) == 1 and (direct is None or direct is files):
            self.sole_file[step] = next(iter(files.values()))
        elif direct is not None and files is None and len(direct) == 1:
            self.sole_file[step] = next(iter(direct.values()))
        else:
            self.sole_file.pop(step, None)

    def _note_span(self, f: FileIndex) -> None:
        covered = f.span()
        if covered is None:
            return
        lo, hi = covered
        span = self.event_spans.get(f.event_key)
        if span is not None:
            lo, hi = min(lo, span[0]), max(hi, span[1])
        self.event_spans[f.event_key] = (lo, hi)

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
            self.global_step_to_tensors[step] = self.layouts.name_set(frozenset(known | names))
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
        """Move the listing token as smdebug does, after a scan whose last key was ``new_token``.

        The token points at the last worker's file of the last complete step, so that the next
        scan lists every file of the incomplete steps again; files of complete steps are never
        needed again. When more than ``window`` steps are incomplete, half a window of them is
        declared complete (smdebug's INCOMPLETE_STEP_WAIT_WINDOW).
        """
        if not new_token:
            return
        token_step = 0 if self.last_index_token is None else _step_of_key(self.last_index_token)
        prefix = new_token.split("index/", 1)[0]
        last_worker = serialize_tf_device(sorted(self.worker_set)[-1]) if self.worker_set else ""
        if self.last_complete_step >= token_step:
            self.last_index_token = prefix + index_key(self.last_complete_step, last_worker)
        if len(self.global_to_mode) - (self.last_complete_step + 1) > self.window:
            step = self.last_complete_step + self.window // 2
            self.last_index_token = prefix + index_key(step, last_worker)
            self.last_complete_step = step

    def mark_all_loaded(self) -> None:
        """Training has ended and the last files were read: every step counts as complete."""
        self.loaded_all_steps = True
        if self.global_to_mode:
            self.last_complete_step = max(self.global_to_mode)

    # ---------------------------------------------------------------- tensors

    def record(self, name: str) -> TensorRecord | None:
        """The per-tensor view of ``name`` (made on first use), or None if never saved."""
        found = self._records.get(name)
        if found is None and name in self.names:
            found = self._records[name] = self._make_record(name)
        return found

    def _make_record(self, name: str) -> TensorRecord:
        # One pass over the steps, kept tight: this runs once per tensor a rule asks about,
        # over every saved step.
        record = TensorRecord(name)
        files_at, steps = self.files_at, record.steps
        for key, names in self.names_at.items():
            if name not in names:
                continue
            by_step = steps.get(key[0])
            if by_step is None:
                by_step = steps[key[0]] = {}
            by_step[key[1]] = holding(files_at[key], name)  # type: ignore[assignment]
        for f in self._files_with_shapes:
            shape = f.shapes.get(name)
            if shape is not None:
                record.original_name = shape.originalname
        return record

    def files_holding(self, name: str, step: int, mode: ModeKeys) -> dict[str, FileIndex] | None:
        """The index files (by worker) that hold ``name`` at ``step`` of ``mode``, None if none.

        For GLOBAL, ``step`` is a global step: a step saved under another mode is found through
        that mode and its mode step."""
        files_at = self.files_at
        if mode is _GLOBAL:
            found = holding(files_at.get((mode, step)), name)
            if found is not None:
                return found
            key = self.global_to_mode.get(step)
            return None if key is None else holding(files_at.get(key), name)
        return holding(files_at.get((mode, step)), name)

    # ---------------------------------------------------------------- questions

    def event_bytes(self, step: int, mode: ModeKeys) -> int:
        """Bytes of the records in the event files of ``step`` of ``mode`` (for GLOBAL, a
        global step), every worker's: what reading the step's values at once fetches."""
        files = self.files_at.get((mode, step))
        if files is None and mode is _GLOBAL:
            key = self.global_to_mode.get(step)
            files = None if key is None else self.files_at.get(key)
        total = 0
        for f in (files or {}).values():
            span = self.event_spans.get(f.event_key)
            if span is not None:
                total += span[1] - span[0]
        return total

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

    def tensor_steps(
        self, record: TensorRecord, mode: ModeKeys, show_incomplete_steps: bool = False
    ) -> list[int]:
        """Steps at which one tensor was saved: global steps for GLOBAL, else mode steps."""
        if mode == ModeKeys.GLOBAL:
            if len(record.steps) == 1 and ModeKeys.GLOBAL in record.steps:
                every = record.mode_steps(ModeKeys.GLOBAL)
            else:
                found: set[int] = set()
                for m, by_step in record.steps.items():
                    if m == ModeKeys.GLOBAL:
                        found.update(by_step)
                    else:
                        table = self.mode_to_global.get(m, {})
                        found.update(table[s] for s in by_step if s in table)
                every = sorted(found)
        else:
            every = record.mode_steps(mode)
        if show_incomplete_steps or self.loaded_all_steps:
            return list(every)
        # smdebug compares the *mode* step against the global watermark here; we convert first
        # (docs/compatibility.md, "Tensor.steps for TRAIN/EVAL").
        return [s for s in every if self.last_complete_step >= (self.to_global(mode, s) or 0)]


def _step_of_key(key: str) -> int:
    return int(key.rsplit("/", 1)[-1].split("_", 1)[0])
