"""smdebug output's trial state: ``TrialState`` with where every tensor lives. No I/O.

``IndexedState`` is filled from parsed index files (``apply_news``: ``apply_index_file``). Each
index file is kept as one ``FileIndex`` (its entries in dicts built in C), and per-tensor views
(``TensorRecord``) are made only for tensors somebody asks about: a trial of 2000 steps x 50
tensors loads without creating 100,000 Python objects. The listing token moves as smdebug
moves it (``update_index_token``).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from evaluator.engine.source import StepBatch
from evaluator.engine.state import TrialState
from evaluator.errors import SMDebugValueError
from evaluator.formats.index_file import IndexColumns, IndexFile
from evaluator.formats.keys import index_key, serialize_tf_device
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.entries import FileIndex, Layouts, TensorRecord, holding

__all__ = ["IndexedState"]

_GLOBAL = ModeKeys.GLOBAL


class IndexedState(TrialState):
    """``TrialState`` of smdebug output: steps and modes, and the index files of each step."""

    def __init__(
        self,
        *,
        num_workers: int,
        workers: set[str],
        incomplete_step_window: int = 1000,
        range_steps: tuple[int | None, int | None] | None = None,
    ) -> None:
        super().__init__(
            num_workers=num_workers,
            workers=workers,
            incomplete_step_window=incomplete_step_window,
            range_steps=range_steps,
        )
        self._merged_names: set[AbstractSet[str]] = set()  # name sets already in ``names``
        self.files_at: dict[tuple[ModeKeys, int], dict[str, FileIndex]] = {}
        # Name sets below are shared between steps (``layouts``) and replaced, never changed.
        self.layouts = Layouts()
        self.names_at: dict[tuple[ModeKeys, int], AbstractSet[str]] = {}  # union, key's files
        self._files_with_shapes: list[FileIndex] = []
        self.event_spans: dict[str, tuple[int, int]] = {}  # event key -> byte span of its records
        # Global step -> the one index file a GLOBAL read without a worker uses there, for
        # steps where that file is the only candidate (one worker, one mode): the hot path of
        # ``Tensor.value``. Steps with more files are answered by ``files_holding``.
        self.sole_file: dict[int, FileIndex] = {}
        self._records: dict[str, TensorRecord] = {}

    # ---------------------------------------------------------------- filling

    def apply_news(self, step: int, worker: str, news: Any) -> None:
        if isinstance(news, StepBatch):
            super().apply_news(step, worker, news)
        else:
            self.apply_index_file(step, worker, news)

    def _interned(self, names: frozenset[str]) -> AbstractSet[str]:
        return self.layouts.name_set(names)

    def apply_index_file(self, step: int, worker: str, index: IndexFile | IndexColumns) -> None:
        """Record one parsed index file written by ``worker`` at ``step``.

        Mode and mode step come from the file's ``meta`` (smdebug ignores the records' own).
        Unlike smdebug, a shape entry does not erase the raw-tensor location of the same name
        in the same file: both are kept (docs/compatibility.md).
        """
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
