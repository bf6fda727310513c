"""smdebug's output as an input format: collection files, per-step index files, and the
event files they point into (the key layout: ``evaluator.formats.keys``; where we read it
differently from smdebug 1.0.34: docs/compatibility.md).

``source`` lists and parses (``SmdebugSource``), ``values`` answers values from index entries
(``FileValues``), ``reader`` with ``held_files`` and ``prefetch`` reads event-file bytes ahead
of the rule; ``index_listing`` is smdebug's ``trial.index_reader`` and ``parent`` tells a folder
of trials from a trial.
"""

from __future__ import annotations

from evaluator.engine.options import TrialOptions
from evaluator.formats.keys import COLLECTIONS_PREFIX, INDEX_PREFIX
from evaluator.sources.registry import SourceFormat
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.values import FileValues
from evaluator.storage.base import Storage

__all__ = ["FORMAT", "FileValues", "SmdebugSource"]


def _detect(key: str) -> bool:
    return key.startswith((COLLECTIONS_PREFIX, INDEX_PREFIX))


def _make(storage: Storage, options: TrialOptions) -> SmdebugSource:
    return SmdebugSource(storage, options=options)


FORMAT = SourceFormat("smdebug", _detect, _make)
