"""The seam between the engine and the input formats: what the engine asks of a format.

A format (smdebug's output, a TensorBoard log, a third party's: docs/formats.md) is a
``Source``: it waits for the trial's collections (``load_collections``), and each ``scan``
hands on what is new, as ``ParsedIndex`` items whose ``news`` the trial state applies: an
smdebug index file, or a format-neutral ``StepBatch`` (new steps per mode, the names they
logged, and the values to publish). Values are answered by the ``ValueStore`` the source opens
for the trial (``open_values``); the ``Tensor`` and ``Trial`` facade asks only that store, never
which format answered.

Nothing here does I/O or knows a format; the engine (cache, state, poller) and the facade
import this module, and each format's package implements it (``evaluator.sources``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evaluator.modes import ModeKeys

if TYPE_CHECKING:
    import numpy as np

    from evaluator.engine.cache import TrialCache
    from evaluator.engine.columns import Column, Columns
    from evaluator.engine.runner import BackgroundLoop
    from evaluator.engine.state import TrialState
    from evaluator.engine.view import TrialView
    from evaluator.formats.collections_file import CollectionsFile
    from evaluator.formats.histogram import Histogram
    from evaluator.storage.base import Storage

__all__ = [
    "IndexScan",
    "LoadedCollections",
    "ParsedIndex",
    "Source",
    "StepBatch",
    "StepRange",
    "ValueStore",
]

StepRange = tuple[int | None, int | None] | None  # a trial's steps [start_step, end_step)


@dataclass
class StepBatch:
    """One scan's new steps, in no format's terms: per mode (in the order the modes first
    appear), the mode steps never handed on before and their global steps (each global step
    names one mode step), sorted by global step; the names each
    mode logged; and ``publish``, called under the trial's lock before the steps are recorded,
    which makes the values of those steps readable (from the source's ``ValueStore``)."""

    steps: list[tuple[ModeKeys, list[int], list[int]]]
    names: dict[ModeKeys, set[str]]
    publish: Callable[[], None] = field(default=lambda: None)


@dataclass(frozen=True, slots=True)
class ParsedIndex:
    """One item of a scan: its key (read once: the cache skips keys it has applied), the
    global step and worker it belongs to, and its ``news``: a ``StepBatch``, or what the
    source's state understands (smdebug's parsed index file)."""

    key: str
    step: int
    worker: str
    index: Any


@dataclass(frozen=True, slots=True)
class IndexScan:
    """One listing's new items in key order, the last key listed (None if none), whether
    the end marker was listed, and whether other keys sat between ``index/`` and the marker."""

    files: list[ParsedIndex]
    last_key: str | None
    end_marker: bool = False
    other_keys: bool = False


@dataclass(frozen=True, slots=True)
class LoadedCollections:
    """What a trial starts from: its collections, workers, and the keys they came from."""

    manifest: CollectionsFile
    workers: set[str]
    keys: list[str]


class Source(Protocol):
    """One trial's input, read through a ``Storage`` on the background loop (or, for a
    location that is no storage, such as an MLflow run, through the format's own client:
    ``storage`` is None then)."""

    kind: str  # the name the source is registered under (``evaluator.sources``)

    @property
    def storage(self) -> Storage | None: ...

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections: ...

    async def scan(
        self,
        start_after: str | None,
        already_read: frozenset[str] | set[str],
        range_steps: StepRange,
        *,
        with_end_marker: bool,
        apply_chunk: Callable[[list[ParsedIndex], str], None] | None = None,
    ) -> IndexScan: ...

    async def training_ended(self) -> bool: ...

    async def read_optional(self, key: str) -> bytes | None: ...

    async def aclose(self) -> None: ...

    def make_state(
        self,
        *,
        num_workers: int,
        workers: set[str],
        incomplete_step_window: int,
        range_steps: StepRange,
    ) -> TrialState:
        """The trial's bookkeeping: a ``TrialState`` (which records ``StepBatch`` news), or
        the format's subclass of it that records news of its own."""
        ...

    def open_values(
        self, cache: TrialCache, view: TrialView, loop: BackgroundLoop
    ) -> ValueStore: ...

    def describe(self) -> dict[str, Any]:
        """How the source reads its location, for the summary and the start line: ``kind``
        (a sentence), and where they apply ``mapping`` (how the location was mapped onto
        steps, modes and tensors, a sentence) and ``end_marker`` (a sentence saying the
        format writes no end marker, so a run ends after idle scans)."""
        ...

    async def preview(self) -> dict[str, Any]:
        """``describe()`` as opening the trial would find it now, without waiting."""
        ...


class ValueStore(Protocol):
    """A trial's values, for one ``Tensor`` name at a time, with smdebug's answers and
    exceptions (``TensorUnavailableForStep``, ``StepUnavailable`` …)."""

    def value(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> np.ndarray: ...

    def value_of(self, name: str) -> Callable[..., np.ndarray]:
        """``value`` of one name with ``Tensor.value``'s signature, ``(step_num,
        mode=GLOBAL, worker=None)``: each ``Tensor`` reads through it (a store may inline
        its fast path there; the others return a closure over ``value``)."""
        ...

    def reduction_value(
        self, name: str, step: int, how: tuple[str, bool], mode: ModeKeys, worker: str | None
    ) -> Any: ...

    def reduction_values(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> dict[tuple[str, bool], Any]: ...

    def histogram(self, name: str, step: int, mode: ModeKeys, worker: str | None) -> Histogram: ...

    def saved_shape(
        self, name: str, step: int, mode: ModeKeys, worker: str | None
    ) -> tuple[int, ...] | None:
        """The shape saved beside the value, None when none was (the value's own then)."""
        ...

    def steps(self, name: str, mode: ModeKeys, show_incomplete_steps: bool) -> list[int]: ...

    def workers(self, name: str, step: int, mode: ModeKeys) -> list[str]: ...

    def original_name(self, name: str) -> str | None: ...

    def whole_column(self, name: str, mode: ModeKeys) -> Column | None:
        """Every step's value of ``name`` at once, None when the store has no such batch
        (the facade then reads step by step)."""
        ...

    def columns(
        self, names: list[str], steps: list[int], mode: ModeKeys, max_bytes: int
    ) -> Columns: ...

    def names_at(self, step: int, mode: ModeKeys) -> set[str] | None:
        """The names held at ``step`` of ``mode``, None when the trial's bookkeeping knows
        (call under the trial's lock)."""
        ...

    def close(self) -> None: ...
