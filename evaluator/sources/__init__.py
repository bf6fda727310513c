"""Input formats: one package per format, found through one registry.

``evaluator.sources.smdebug`` reads smdebug's output, ``evaluator.sources.tensorboard`` a
TensorBoard log folder; a third party's format registers itself through the entry-point group
``rule_evaluator.sources`` (docs/formats.md). Each implements the engine's seam,
``evaluator.engine.source`` (``Source``, ``ValueStore``, ``StepBatch``), re-exported here for
format authors with ``SourceBase`` (the protocol's shared defaults, for a source to inherit).
The Trial API asks the registry, never a format package.
"""

from __future__ import annotations

from evaluator.engine.source import (
    IndexScan,
    LoadedCollections,
    ParsedIndex,
    Source,
    StepBatch,
    StepRange,
    ValueStore,
)
from evaluator.engine.source_base import SourceBase
from evaluator.sources.registry import (
    ENTRY_POINT_GROUP,
    LocationForm,
    SourceFormat,
    check_kind,
    check_location_form,
    detect_kind,
    known_kinds,
    load_built_ins,
    location_format,
    make_source,
    open_location,
    register_source,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "IndexScan",
    "LoadedCollections",
    "LocationForm",
    "ParsedIndex",
    "Source",
    "SourceBase",
    "SourceFormat",
    "StepBatch",
    "StepRange",
    "ValueStore",
    "check_kind",
    "check_location_form",
    "detect_kind",
    "known_kinds",
    "load_built_ins",
    "location_format",
    "make_source",
    "open_location",
    "register_source",
]
