"""Input formats: one package per format, found through one registry.

``evaluator.sources.smdebug`` reads smdebug's output, ``evaluator.sources.tensorboard`` a
TensorBoard log folder; a third party's format registers itself through the entry-point group
``rule_evaluator.sources`` (docs/formats.md). Each implements the engine's seam,
``evaluator.engine.source`` (``Source``, ``ValueStore``, ``StepBatch``), re-exported here for
format authors. The Trial API asks the registry, never a format package.
"""

from __future__ import annotations

from evaluator.engine.source import (
    IndexScan,
    LoadedCollections,
    ParsedIndex,
    Source,
    StepBatch,
    ValueStore,
)
from evaluator.sources.registry import (
    ENTRY_POINT_GROUP,
    SourceFormat,
    check_kind,
    detect_kind,
    known_kinds,
    load_built_ins,
    make_source,
    register_source,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "IndexScan",
    "LoadedCollections",
    "ParsedIndex",
    "Source",
    "SourceFormat",
    "StepBatch",
    "ValueStore",
    "check_kind",
    "detect_kind",
    "known_kinds",
    "load_built_ins",
    "make_source",
    "register_source",
]
