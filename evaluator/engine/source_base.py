"""``SourceBase``: the parts of a ``Source`` that most formats answer the same way.

A format's source may inherit it and write only what its format decides: how it waits for a
trial (``load_collections``), what one scan brings (``scan_new``), its ``ValueStore``
(``open_values``), its own words (``describe``) and closing (``aclose``). It gives the rest:

* ``make_state``: a ``state_type`` (``TrialState``, which records ``StepBatch`` news; smdebug's
  ``IndexedState``);
* ``scan``: the protocol's call, handed to ``scan_new(range_steps, with_end_marker=)`` for a
  source that keeps its own place in what it read (only smdebug's listing of index files uses
  ``start_after``, ``already_read`` and ``apply_chunk``, and writes ``scan`` itself);
* ``training_ended`` (the end marker in the storage), ``read_optional`` (a file that may be
  missing) and ``preview`` (``describe()``).

``Source`` stays the contract: a plug-in that does not inherit this class satisfies it by
writing every member itself (docs/formats.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from evaluator.engine.source import IndexScan, ParsedIndex, Source, StepRange
from evaluator.engine.state import TrialState
from evaluator.errors import ObjectNotFound
from evaluator.formats.keys import END_OF_JOB_KEY

if TYPE_CHECKING:
    from collections.abc import Callable

    from evaluator.storage.base import Storage

__all__ = ["SourceBase"]


class SourceBase(Source):
    """``Source`` with its shared defaults (module docstring); a subclass over a storage
    declares ``storage: Storage``."""

    storage: Storage | None = None  # a plain attribute here (the protocol reads it only)
    state_type: ClassVar[type[TrialState]] = TrialState

    def make_state(
        self,
        *,
        num_workers: int,
        workers: set[str],
        incomplete_step_window: int,
        range_steps: StepRange,
    ) -> TrialState:
        return self.state_type(
            num_workers=num_workers,
            workers=workers,
            incomplete_step_window=incomplete_step_window,
            range_steps=range_steps,
        )

    async def scan(
        self,
        start_after: str | None,
        already_read: frozenset[str] | set[str],
        range_steps: StepRange,
        *,
        with_end_marker: bool,
        apply_chunk: Callable[[list[ParsedIndex], str], None] | None = None,
    ) -> IndexScan:
        return await self.scan_new(range_steps, with_end_marker=with_end_marker)

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        """What is new since the last scan, within ``range_steps``; whether the run has ended
        is looked up only ``with_end_marker``."""
        raise NotImplementedError(f"{type(self).__name__} writes neither scan nor scan_new")

    async def training_ended(self) -> bool:
        """Whether the end marker (``training_job_end.ts``) is in the storage."""
        return self.storage is not None and await self.storage.exists(END_OF_JOB_KEY)

    async def read_optional(self, key: str) -> bytes | None:
        """The bytes of ``key``; None when it is missing (or the source has no storage)."""
        if self.storage is None:
            return None
        try:
            return await self.storage.read(key)
        except ObjectNotFound:
            return None

    async def preview(self) -> dict[str, Any]:
        return self.describe()
