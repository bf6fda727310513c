"""What one index file says, kept as parsed: ``FileIndex`` (one index file of one worker at one
step), ``StepEntry`` (one tensor in it: value, reductions, shape), ``Location`` (where its
bytes are) and ``TensorRecord`` (one tensor's view over every step, made on demand). No I/O."""

from __future__ import annotations

from typing import NamedTuple

from evaluator.formats.index_file import IndexFile, ShapeEntry, TensorEntry
from evaluator.formats.keys import REDUCTIONS_PREFIX, parse_reduction_tensor_name
from evaluator.modes import ModeKeys

__all__ = ["FileIndex", "Location", "StepEntry", "TensorRecord", "holding"]

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


class FileIndex:
    """One index file: every entry of one worker at one step."""

    __slots__ = (
        "step",
        "worker",
        "mode",
        "mode_step",
        "event_key",
        "tensors",
        "shapes",
        "reductions",
        "names",
    )

    def __init__(self, step: int, worker: str, index: IndexFile) -> None:
        self.step = step
        self.worker = worker
        self.mode = index.meta.mode
        self.mode_step = index.meta.mode_step
        self.event_key = index.meta.event_file_name or ""
        tensors = {t.tensorname: t for t in index.tensors}
        self.reductions = _NO_REDUCTIONS
        if tensors and REDUCTIONS_PREFIX in "\n".join(tensors):
            self.reductions = {}
            for name in [n for n in tensors if REDUCTIONS_PREFIX in n]:
                entry = tensors.pop(name)
                parsed = parse_reduction_tensor_name(name)
                if parsed is not None:  # else malformed: smdebug fails on it, we skip it
                    base, red, is_abs = parsed
                    self.reductions.setdefault(base, {})[(red, is_abs)] = entry
        self.tensors = tensors
        self.shapes = (
            {s.tensorname: s for s in index.shapes if REDUCTIONS_PREFIX not in s.tensorname}
            if index.shapes
            else _NO_SHAPES
        )
        names = set(tensors)
        if self.shapes:
            names.update(self.shapes)
        if self.reductions:
            names.update(self.reductions)
        self.names = names

    def merge(self, other: FileIndex) -> None:
        """A second index file for the same worker and (mode, mode step): later entries win."""
        self.tensors = {**self.tensors, **other.tensors}
        self.shapes = {**self.shapes, **other.shapes} if other.shapes else self.shapes
        if other.reductions:
            self.reductions = {**self.reductions, **other.reductions}
        self.names = self.names | other.names

    def entry(self, name: str) -> StepEntry:
        t = self.tensors.get(name)
        s = self.shapes.get(name)
        saved = self.reductions.get(name)
        return StepEntry(
            Location(self.event_key, t.start_idx, t.length) if t is not None else None,
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
