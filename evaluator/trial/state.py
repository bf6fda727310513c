"""What is known about a trial: steps, modes, workers and where every tensor lives. No I/O.

``TrialState`` is filled from parsed index files (``apply_index_file``) and answers the
bookkeeping questions of smdebug's Trial (``steps``, ``has_passed_step``, ``mode_modestep`` …)
with smdebug 1.0.34's semantics. The facade in ``trial.py`` owns I/O and refreshing; this module
owns the decision tables, so they can be tested without any files.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import NamedTuple

from evaluator.errors import SMDebugValueError
from evaluator.formats.index_file import IndexFile
from evaluator.formats.keys import index_key, serialize_tf_device
from evaluator.modes import ModeKeys, StepState

__all__ = ["REDUCTIONS_PREFIX", "Location", "StepEntry", "TensorRecord", "TrialState"]

REDUCTIONS_PREFIX = "smdebug/reductions/"


class Location(NamedTuple):
    """A tensor's record in an event file: key relative to the trial root, byte range."""

    event_key: str
    start: int
    length: int


class StepEntry:
    """One tensor at one (mode, mode step) for one worker."""

    __slots__ = ("location", "shape", "reductions")

    def __init__(self, location: Location | None = None) -> None:
        self.location = location
        self.shape: tuple[int, ...] | None = None
        self.reductions: dict[tuple[str, bool], Location] = _NO_REDUCTIONS

    def add_reduction(self, key: tuple[str, bool], location: Location) -> None:
        if self.reductions is _NO_REDUCTIONS:
            self.reductions = {}
        self.reductions[key] = location


_NO_REDUCTIONS: dict[tuple[str, bool], Location] = {}  # shared, never written: most tensors have none


@dataclass(slots=True)
class TensorRecord:
    """Everything indexed for one tensor: ``steps[mode][mode_step][worker] -> StepEntry``."""

    name: str
    steps: dict[ModeKeys, dict[int, dict[str, StepEntry]]] = field(default_factory=dict)
    original_name: str | None = None

    def entries(self, mode: ModeKeys, mode_step: int) -> dict[str, StepEntry] | None:
        return self.steps.get(mode, {}).get(mode_step)

    def entry(self, mode: ModeKeys, mode_step: int, worker: str) -> StepEntry:
        workers = self.steps.setdefault(mode, {}).setdefault(mode_step, {})
        found = workers.get(worker)
        if found is None:
            found = workers[worker] = StepEntry()
        return found


def split_reduction_name(name: str) -> tuple[str, str, bool] | None:
    """``smdebug/reductions/abs_l1/w`` -> ``("w", "l1", True)``; None for a plain tensor."""
    at = name.find(REDUCTIONS_PREFIX)
    if at < 0:
        return None
    rest = name[at + len(REDUCTIONS_PREFIX) :]
    reduction, _, tensor = rest.partition("/")
    is_abs = "abs_" in reduction
    if is_abs:
        reduction = reduction.split("abs_", 1)[1]
    return tensor, reduction, is_abs


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
        self.tensors: dict[str, TensorRecord] = {}
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.global_step_to_tensors: dict[int, set[str]] = {}
        self.mode_to_tensors: dict[ModeKeys, set[str]] = {}
        self.workers_for_global_step: dict[int, set[str]] = {}
        self.last_complete_step = -1
        self.last_index_token: str | None = None
        self.loaded_all_steps = False
        self.event_spans: dict[str, tuple[int, int]] = {}  # event key -> byte span of its records
        self._sorted: dict[ModeKeys, list[int]] = {}

    # ---------------------------------------------------------------- filling

    def step_in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        begin, end = self.range_steps
        return (begin is None or begin <= step) and (end is None or step < end)

    def apply_index_file(self, step: int, worker: str, index: IndexFile) -> None:
        """Record every entry of one parsed index file written by ``worker`` at ``step``.

        Mode and mode step come from the file's ``meta`` (smdebug ignores the records' own).
        Unlike smdebug, a shape entry does not erase the raw-tensor location of the same name
        in the same file: both are kept (docs/compatibility.md).
        """
        meta = index.meta
        mode, mode_step = meta.mode, meta.mode_step
        if not index.tensors and not index.shapes:
            return
        if mode_step < 0:
            first = (index.tensors or index.shapes)[0].tensorname
            raise SMDebugValueError(
                f"mode step number {mode_step} for tensor {first} can not be less than 0"
            )
        names: set[str] = set()
        event_key = meta.event_file_name or ""
        lo = hi = -1
        for t in index.tensors:
            name, start, length = t.tensorname, t.start_idx, t.length
            loc = Location(event_key, start, length)
            if lo < 0 or start < lo:
                lo = start
            if start + length > hi:
                hi = start + length
            if REDUCTIONS_PREFIX in name:
                tname, red, is_abs = split_reduction_name(name)  # type: ignore[misc]
                self._entry(tname, mode, mode_step, worker).add_reduction((red, is_abs), loc)
                names.add(tname)
                continue
            workers = self._workers(name, mode, mode_step)
            entry = workers.get(worker)
            if entry is None:
                workers[worker] = StepEntry(loc)
            else:
                entry.location = loc
            names.add(name)
        for sh in index.shapes:
            reduction = split_reduction_name(sh.tensorname) if REDUCTIONS_PREFIX in sh.tensorname else None
            tname = reduction[0] if reduction else sh.tensorname
            entry = self._entry(tname, mode, mode_step, worker)
            if reduction is None:
                entry.shape = tuple(sh.shape)
                self.tensors[tname].original_name = sh.originalname
            names.add(tname)
        if hi > 0:
            span = self.event_spans.get(event_key)
            self.event_spans[event_key] = (lo, hi) if span is None else (min(lo, span[0]), max(hi, span[1]))
        self._note_step(names, step, worker, mode, mode_step)

    def _workers(self, tname: str, mode: ModeKeys, mode_step: int) -> dict[str, StepEntry]:
        record = self.tensors.get(tname)
        if record is None:
            record = self.tensors[tname] = TensorRecord(tname)
        by_step = record.steps.get(mode)
        if by_step is None:
            by_step = record.steps[mode] = {}
        workers = by_step.get(mode_step)
        if workers is None:
            workers = by_step[mode_step] = {}
        return workers

    def _entry(self, tname: str, mode: ModeKeys, mode_step: int, worker: str) -> StepEntry:
        workers = self._workers(tname, mode, mode_step)
        entry = workers.get(worker)
        if entry is None:
            entry = workers[worker] = StepEntry()
        return entry

    def _note_step(self, names: set[str], step: int, worker: str, mode: ModeKeys,
                   mode_step: int) -> None:
        if mode != ModeKeys.GLOBAL:
            steps = self.mode_to_global.setdefault(mode, {})
            if mode_step not in steps:
                steps[mode_step] = step
                self._sorted.pop(mode, None)
            self.mode_to_tensors.setdefault(mode, set()).update(names)
        if step not in self.global_to_mode:
            self.global_to_mode[step] = (mode, mode_step)
            self._sorted.pop(ModeKeys.GLOBAL, None)
        self.global_step_to_tensors.setdefault(step, set()).update(names)
        workers = self.workers_for_global_step.setdefault(step, set())
        workers.add(worker)
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

    # ---------------------------------------------------------------- questions

    def all_steps(self, mode: ModeKeys) -> list[int]:
        """Sorted steps of ``mode`` (global steps for GLOBAL), complete or not. Do not mutate."""
        cached = self._sorted.get(mode)
        if cached is None:
            source = self.global_to_mode if mode == ModeKeys.GLOBAL else self.mode_to_global.get(mode, {})
            cached = self._sorted[mode] = sorted(source)
        return cached

    def to_global(self, mode: ModeKeys, step: int) -> int | None:
        if mode == ModeKeys.GLOBAL:
            return step
        return self.mode_to_global.get(mode, {}).get(step)

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
        return [s for s in every if self.is_complete(self.to_global(mode, s))]

    def has_passed_step(self, step: int, mode: ModeKeys) -> StepState:
        """smdebug's decision table: is ``step`` of ``mode`` readable, skipped, or still to come?"""
        every = self.all_steps(mode)
        i = bisect.bisect_left(every, step)
        if i < len(every):
            g = self.to_global(mode, every[i])
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

    def tensor_steps(self, record: TensorRecord, mode: ModeKeys,
                     show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which one tensor was saved: global steps for GLOBAL, else mode steps."""
        if mode == ModeKeys.GLOBAL:
            found: set[int] = set()
            for m, by_step in record.steps.items():
                if m == ModeKeys.GLOBAL:
                    found.update(by_step)
                else:
                    table = self.mode_to_global.get(m, {})
                    found.update(table[s] for s in by_step if s in table)
            every = sorted(found)
        else:
            every = sorted(record.steps.get(mode, {}))
        if show_incomplete_steps or self.loaded_all_steps:
            return every
        # smdebug compares the *mode* step against the global watermark here; we convert first
        # (docs/compatibility.md, "Tensor.steps for TRAIN/EVAL").
        return [s for s in every if self.last_complete_step >= (self.to_global(mode, s) or 0)]


def _step_of_key(key: str) -> int:
    return int(key.rsplit("/", 1)[-1].split("_", 1)[0])
