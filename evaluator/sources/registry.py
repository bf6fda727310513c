"""Which input formats exist, and which one a location holds: one registry.

A format registers a ``SourceFormat`` under its name: ``detect(key)`` says whether one listed
key shows the format (smdebug: ``collections/`` or ``index/``; TensorBoard: an
``events.out.tfevents.*`` file), ``make(storage, options)`` opens its ``Source``. The built-in
formats are the packages ``evaluator.sources.smdebug`` and ``evaluator.sources.tensorboard``;
third-party formats come from the entry-point group ``rule_evaluator.sources`` (each entry
point names a ``SourceFormat``; docs/formats.md). ``trial_format`` is one of these names, or
``auto``: the location is listed once, and the first format that one of its keys shows wins
(smdebug, then TensorBoard, then plug-ins in name order, read only when no built-in claims
the location); a location that shows none is smdebug's (it waits for collection files).

A format may also open locations that are no storage at all (``LocationForm``: an MLflow run,
``runs:/<run_id>``, lives in a tracking store): ``open_location`` gives its source for a
location of that form, and such a trial has no ``Storage`` under it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, cast

from evaluator.engine.options import TrialOptions
from evaluator.engine.source import Source
from evaluator.errors import ConfigurationError
from evaluator.storage.base import ObjectInfo, Storage

__all__ = [
    "ENTRY_POINT_GROUP",
    "LocationForm",
    "SourceFormat",
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

log = logging.getLogger("evaluator.sources")

ENTRY_POINT_GROUP = "rule_evaluator.sources"
AUTO = "auto"
# The built-in formats, in the order detection tries them, by name -> package.
_BUILT_IN = {
    "smdebug": "evaluator.sources.smdebug",
    "tensorboard": "evaluator.sources.tensorboard",
    "trainer_state": "evaluator.sources.tensorboard.trainer_state",
    "mlflow": "evaluator.sources.mlflow",
}


@dataclass(frozen=True, slots=True)
class LocationForm:
    """Locations a format opens without a storage: those starting with ``prefix``, spelled
    ``form`` in messages (``runs:/<run_id>``), well formed when ``pattern`` matches them whole;
    ``open(location, options)`` gives the source."""

    prefix: str
    form: str
    pattern: re.Pattern[str]
    open: Callable[[str, TrialOptions], Source]


@dataclass(frozen=True, slots=True)
class SourceFormat:
    """One input format: its name, how a listed key shows it, and how to open it (over a
    storage; and, with ``location``, a location of its own form)."""

    kind: str
    detect: Callable[[str], bool]
    make: Callable[[Storage, TrialOptions], Source]
    location: LocationForm | None = None


_formats: dict[str, SourceFormat] = {}
_failed: dict[str, str] = {}  # plug-ins that could not be loaded: name -> why
_loaded = False  # the built-ins
_plugins_loaded = False  # the entry points (a scan of every installed package: ~30 ms)


def register_source(
    kind: str,
    detect: Callable[[str], bool],
    make: Callable[[Storage, TrialOptions], Source],
    *,
    location: LocationForm | None = None,
) -> SourceFormat:
    """Make the format ``kind`` known (a later registration of the same name replaces it)."""
    if not kind or kind == AUTO or not kind.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"a format's name is a word of letters, digits, - and _, got {kind!r}")
    found = _formats[kind] = SourceFormat(kind, detect, make, location)
    return found


def load_built_ins() -> None:
    """Import and register the built-in formats now, not on the first trial's opening (the
    module that opens trials calls it as it is imported)."""
    _load()


def _load() -> None:
    """Register the built-in formats first (once per process)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    built_in = {}
    for module in _BUILT_IN.values():
        fmt = importlib.import_module(module).FORMAT
        built_in[fmt.kind] = fmt
    _formats.update({**built_in, **_formats})  # built-ins first, in their order


def entry_points(*, group: str) -> list[Any]:
    """The installed packages' entry points of ``group`` (importlib.metadata loads on first
    use: it costs about 10 ms of imports that smdebug output never needs)."""
    from importlib import metadata

    return list(metadata.entry_points(group=group))


def _load_plugins() -> None:
    """Register the entry points' formats (once per process), after the built-ins."""
    global _plugins_loaded
    _load()
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            fmt = point.load()
        except Exception as e:  # a broken plug-in must not stop the built-in formats
            _failed[point.name] = f"{type(e).__name__}: {e}"
            log.warning("input format %r could not be loaded: %s", point.name, e)
            continue
        if not isinstance(fmt, SourceFormat):
            _failed[point.name] = f"{point.value} is not a SourceFormat"
            log.warning("input format %r: %s is not a SourceFormat", point.name, point.value)
            continue
        _formats.setdefault(fmt.kind, fmt)


def known_kinds() -> list[str]:
    """Every format's name, in the order detection tries them."""
    _load_plugins()
    return list(_formats)


def _format(kind: str) -> SourceFormat:
    _load()
    found = _formats.get(kind)
    if found is None:
        _load_plugins()
        found = _formats.get(kind)
    if found is None:
        broken = f"; {kind!r} failed to load: {_failed[kind]}" if kind in _failed else ""
        raise ConfigurationError(
            f"unknown trial_format {kind!r}: the known ones are "
            f"{', '.join([AUTO, *_formats])}{broken} (a plug-in format registers itself "
            f"through the entry-point group {ENTRY_POINT_GROUP!r}: docs/formats.md)"
        )
    return found


def check_kind(kind: str) -> None:
    """ConfigurationError naming the known formats when ``kind`` is neither one nor auto (a
    built-in name is known without loading any format)."""
    if kind != AUTO and kind not in _BUILT_IN:
        _format(kind)


def location_format(location: str) -> SourceFormat | None:
    """The built-in format that opens ``location`` itself (its ``LocationForm`` prefix), None
    for a location read through a storage (a folder, ``s3://``)."""
    _load()
    for fmt in _formats.values():
        if fmt.location is not None and location.startswith(fmt.location.prefix):
            return fmt
    return None


def check_location_form(key: str, location: str) -> bool:
    """Whether ``location`` is one a format opens itself; a ``ConfigurationError`` naming
    ``key`` when it starts like one but is not well formed."""
    fmt = location_format(location)
    if fmt is None or fmt.location is None:
        return False
    if not fmt.location.pattern.fullmatch(location):
        raise ConfigurationError(
            f"{key} must be {fmt.location.form} for a {fmt.kind} trial, got {location!r}"
        )
    return True


def open_location(location: str, options: TrialOptions) -> Source | None:
    """The source of a location a format opens itself, None for any other location. A
    ``trial_format`` other than auto and that format's is a ``ConfigurationError``."""
    fmt = location_format(location)
    if fmt is None or fmt.location is None:
        return None
    check_location_form("the trial", location)
    if options.trial_format not in (AUTO, fmt.kind):
        raise ConfigurationError(
            f"trial_format {options.trial_format!r} cannot read {location}: a location of the "
            f"form {fmt.location.form} is a {fmt.kind} trial (leave trial_format auto)"
        )
    return fmt.location.open(location, options)


def make_source(kind: str, storage: Storage, options: TrialOptions) -> Source:
    """Open the format ``kind``'s source over ``storage``."""
    return _format(kind).make(storage, options)


async def detect_kind(storage: Storage, options: TrialOptions) -> str:
    """``options.trial_format``, or for ``auto`` the first registered format that a listed
    key shows (one listing, ended at smdebug's first key). The built-ins are tried first and
    win over every other format, so the plug-ins are loaded only when no built-in matched."""
    if options.trial_format != AUTO:
        check_kind(options.trial_format)
        return options.trial_format
    _load()
    built_in = [f for f in _formats.values() if f.kind in _BUILT_IN]
    first = built_in[0]
    seen: set[str] = set()
    others: list[str] = []  # keys no built-in format claims, for the plug-ins
    pages = cast(AsyncGenerator[ObjectInfo, None], storage.list_after(""))
    async with contextlib.aclosing(pages) as listing:
        async for obj in listing:
            claimed = False
            for fmt in built_in:
                if fmt.detect(obj.key):
                    if fmt is first:
                        return fmt.kind
                    seen.add(fmt.kind)
                    claimed = True
            if not seen and not claimed:
                others.append(obj.key)
    found = next((f.kind for f in built_in if f.kind in seen), None)
    if found is not None:
        return found
    _load_plugins()
    rest = [f for f in _formats.values() if f.kind not in _BUILT_IN]
    found = next((f.kind for f in rest if any(f.detect(k) for k in others)), None)
    return found or first.kind
