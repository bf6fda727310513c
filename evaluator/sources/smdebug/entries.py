"""What one index file says, kept as parsed: ``FileIndex`` (one index file of one worker at one
step), ``StepEntry`` (one tensor in it: value, reductions, shape), ``Location`` (where its
bytes are) and ``TensorRecord`` (one tensor's view over every step, made on demand). No I/O."""

from __future__ import annotations

import operator
from array import array
from collections.abc import Sequence
from typing import NamedTuple

from evaluator.formats.index_file import IndexColumns, IndexFile, ShapeEntry, TensorEntry
from evaluator.formats.keys import REDUCTIONS_PREFIX, parse_reduction_tensor_name
from evaluator.modes import ModeKeys

__all__ = ["FileIndex", "Layout", "Layouts", "Location", "StepEntry", "TensorRecord", "holding"]

_NO_SHAPES: dict[str, ShapeEntry] = {}
_NO_REDUCTIONS: dict[str, dict[tuple[str, bool], TensorEntry]] = {}


class Location(NamedTuple):
    """A tensor's record in an event file: key relative to the trial root, byte range."""

    event_key: str
    start: int
    length: int


class StepEntry:
    """One tensor at one (mode, mode step) for one worker: where its value, shape and saved
    reductions are. A view made on demand from the worker's ``FileIndex``."""

    __slots__ = ("location", "shape", "reductions")

    def __init__(
        self,
        location: Location | None,
        shape: tuple[int, ...] | None,
        reductions: dict[tuple[str, bool], Location],
    ) -> None:
        self.location = location
        self.shape = shape
        self.reductions = reductions


class Layout:
    """The raw-tensor names of an index file, in its order: shared by every index file that
    lists the same names in the same order (every step of most trials), with where each name's
    byte range sits in a file's ``spans`` (a repeated name: the later entry wins)."""

    __slots__ = ("names", "position", "name_set")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.position = {n: i for i, n in enumerate(names)}
        self.name_set = frozenset(names)


# The lists of an ``IndexColumns`` (names, starts, lengths), and what a file makes of them:
# layout, starts and lengths arrays, span.
_Columns = tuple[
    tuple[list[str], list[int], list[int]],
    Layout,
    "array[int]",
    "array[int]",
    tuple[int, int] | None,
]


# As many as ``IndexParser`` keeps payloads (16): files sharing any of them find theirs.
_KEPT_COLUMNS = 16


class Layouts:
    """One trial's layouts and tensor names, interned: a trial of many steps keeps one copy
    of each (``max_layouts`` at most; past it, files keep layouts of their own)."""

    def __init__(self, max_layouts: int = 4096) -> None:
        self._layouts: dict[tuple[str, ...], Layout] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}
        self._max = max_layouts
        # The columns of recent index files, by the identity of their names list: files whose
        # payload parsed once share its lists (``IndexParser``), and get the layout, the
        # arrays (copied) and the span without going over the lists again.
        self._columns: dict[int, _Columns] = {}

    def columns(self, index: IndexColumns) -> _Columns:
        """The layout, the ``starts`` and ``lengths`` arrays (to be copied) and the span of
        the raw tensors of ``index``, a file without reductions."""
        names = index.names
        found = self._columns.get(id(names))
        if found is None or found[0] != (names, index.starts, index.lengths):
            starts = array("q", index.starts)
            lengths = array("q", index.lengths)
            # From the lists: three times cheaper than from the arrays.
            span = (
                (min(index.starts), max(map(operator.add, index.starts, index.lengths)))
                if names
                else None
            )
            lists = (names, index.starts, index.lengths)
            found = (lists, self.layout(tuple(names)), starts, lengths, span)
            if self._max:
                if len(self._columns) >= _KEPT_COLUMNS:
                    self._columns.clear()
                self._columns[id(names)] = found
        return found

    def layout(self, names: tuple[str, ...]) -> Layout:
        found = self._layouts.get(names)
        if found is None:
            found = Layout(names)
            if len(self._layouts) < self._max:
                self._layouts[names] = found
        return found

    def name_set(self, names: frozenset[str]) -> frozenset[str]:
        """``names``, or an equal set already kept (one copy of each step's name set)."""
        found = self._sets.get(names)
        if found is None:
            found = names
            if len(self._sets) < self._max:
                self._sets[names] = names
        return found


_NO_LAYOUTS = Layouts(0)
_NAME = operator.itemgetter(0)  # of a TensorEntry
_START = operator.itemgetter(1)
_LENGTH = operator.itemgetter(2)


class FileIndex:
    """One index file: every entry of one worker at one step. Raw tensors are kept compact:
    a shared ``layout`` of names, and arrays of their byte ranges, ``starts`` and
    ``lengths`` (position ``layout.position[name]``)."""

    __slots__ = (
        "step",
        "worker",
        "mode",
        "mode_step",
        "event_key",
        "layout",
        "starts",
        "lengths",
        "shapes",
        "reductions",
        "names",
        "_span",
    )

    def __init__(
        self,
        step: int,
        worker: str,
        index: IndexFile | IndexColumns,
        layouts: Layouts = _NO_LAYOUTS,
    ) -> None:
        self.step = step
        self.worker = worker
        self.mode = index.meta.mode
        self.mode_step = index.meta.mode_step
        self.event_key = index.meta.event_file_name or ""
        self.reductions = _NO_REDUCTIONS
        self._span: tuple[int, int] | None = None  # of the raw tensors, when known
        if isinstance(index, IndexColumns):
            names = index.names
            if not names or REDUCTIONS_PREFIX not in "\n".join(names):  # the common case
                _, self.layout, starts, lengths, self._span = layouts.columns(index)
                # Copies: a file's arrays are its own (the reader tells files apart by them).
                self.starts = starts[:]
                self.lengths = lengths[:]
                self._set_shapes(index.shapes, layouts)
                return
        entries = index.tensors
        if entries and REDUCTIONS_PREFIX in "\n".join([t.tensorname for t in entries]):
            self.reductions = {}
            kept = []
            for entry in entries:
                name = entry.tensorname
                if REDUCTIONS_PREFIX not in name:
                    kept.append(entry)
                    continue
                parsed = parse_reduction_tensor_name(name)
                if parsed is not None:  # else malformed: smdebug fails on it, we skip it
                    base, red, is_abs = parsed
                    self.reductions.setdefault(base, {})[(red, is_abs)] = entry
            entries = tuple(kept)
        self._set_entries(entries, layouts)
        self._set_shapes(index.shapes, layouts)

    def _set_shapes(self, shapes: tuple[ShapeEntry, ...], layouts: Layouts) -> None:
        self.shapes = (
            {s.tensorname: s for s in shapes if REDUCTIONS_PREFIX not in s.tensorname}
            if shapes
            else _NO_SHAPES
        )
        names: frozenset[str] | set[str] = self.layout.name_set
        if self.shapes or self.reductions:
            names = set(names)
            names.update(self.shapes)
            names.update(self.reductions)
        self.names = layouts.name_set(frozenset(names)) if isinstance(names, set) else names

    def _set_entries(self, entries: Sequence[TensorEntry], layouts: Layouts) -> None:
        self.layout = layouts.layout(tuple(map(_NAME, entries)))
        self.starts = array("q", map(_START, entries))
        self.lengths = array("q", map(_LENGTH, entries))

    @property
    def tensors(self) -> dict[str, TensorEntry]:
        """The raw-tensor entries by name (a new dict; the hot paths use ``location``)."""
        starts, lengths = self.starts, self.lengths
        return {
            name: TensorEntry(name, starts[i], lengths[i])
            for name, i in self.layout.position.items()
        }

    def location(self, name: str) -> tuple[int, int] | None:
        """(start, length) of ``name``'s raw value in the event file, None if not listed."""
        i = self.layout.position.get(name)
        if i is None:
            return None
        return self.starts[i], self.lengths[i]

    def span(self) -> tuple[int, int] | None:
        """The byte range covering every record this file lists (values and reductions)."""
        if not self.reductions:
            if self._span is not None:
                return self._span
            if not self.starts:
                return None
            return min(self.starts), max(map(operator.add, self.starts, self.lengths))
        starts = list(self.starts)
        ends = list(map(operator.add, self.starts, self.lengths))
        for saved in self.reductions.values():
            starts += [t.start_idx for t in saved.values()]
            ends += [t.start_idx + t.length for t in saved.values()]
        return (min(starts), max(ends)) if starts else None

    def merge(self, other: FileIndex) -> None:
        """A second index file for the same worker and (mode, mode step): later entries win."""
        merged = {**self.tensors, **other.tensors}
        self._set_entries(list(merged.values()), _NO_LAYOUTS)
        self._span = None
        self.shapes = {**self.shapes, **other.shapes} if other.shapes else self.shapes
        if other.reductions:
            self.reductions = {**self.reductions, **other.reductions}
        self.names = self.names | other.names

    def entry(self, name: str) -> StepEntry:
        found = self.location(name)
        s = self.shapes.get(name)
        saved = self.reductions.get(name)
        return StepEntry(
            Location(self.event_key, *found) if found is not None else None,
            s.shape if s is not None else None,
            {k: Location(self.event_key, r.start_idx, r.length) for k, r in saved.items()}
            if saved
            else {},
        )


class TensorRecord:
    """Where one tensor was saved: ``steps[mode][mode_step] -> {worker: FileIndex}``."""

    __slots__ = ("name", "steps", "original_name", "_sorted")

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps: dict[ModeKeys, dict[int, dict[str, FileIndex]]] = {}
        self.original_name: str | None = None
        self._sorted: dict[ModeKeys, list[int]] = {}

    def add(self, mode: ModeKeys, mode_step: int, files: dict[str, FileIndex]) -> None:
        """Record the step's files that hold this tensor (after a new file arrived there)."""
        held = holding(files, self.name)
        if held is None:
            return
        self.steps.setdefault(mode, {})[mode_step] = held
        for f in held.values():
            shape = f.shapes.get(self.name)
            if shape is not None:
                self.original_name = shape.originalname
        if self._sorted:
            self._sorted.clear()

    def files(self, mode: ModeKeys, mode_step: int) -> dict[str, FileIndex] | None:
        by_step = self.steps.get(mode)
        return None if by_step is None else by_step.get(mode_step)

    def entries(self, mode: ModeKeys, mode_step: int) -> dict[str, StepEntry] | None:
        files = self.files(mode, mode_step)
        return None if files is None else {w: f.entry(self.name) for w, f in files.items()}

    def mode_steps(self, mode: ModeKeys) -> list[int]:
        cached = self._sorted.get(mode)
        if cached is None:
            cached = self._sorted[mode] = sorted(self.steps.get(mode, ()))
        return cached


def holding(files: dict[str, FileIndex] | None, name: str) -> dict[str, FileIndex] | None:
    """The workers' files of one step that saved ``name``: the step's own map when all did (so
    one map serves every tensor), a filtered copy when some did, None when none did."""
    if not files:
        return None
    if len(files) == 1:
        return files if name in next(iter(files.values())).names else None
    found = {w: f for w, f in files.items() if name in f.names}
    if len(found) == len(files):
        return files
    return found or None
