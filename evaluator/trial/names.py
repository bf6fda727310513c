"""Which tensor names ``Trial.tensor_names`` answers: at a step or mode, matching the user's
regexes, or in a collection. Pure functions over the trial's state and collections."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from evaluator.engine.options import TrialOptions
from evaluator.engine.source import ValueStore
from evaluator.engine.state import TrialState
from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys
from evaluator.trial.patterns import compile_pattern, matching_names

__all__ = ["names_at", "numeric_suffix", "select_names"]

log = logging.getLogger("evaluator.trial")


def names_at(
    state: TrialState, step: int | None, mode: ModeKeys, values: ValueStore | None = None
) -> set[str]:
    """The names saved at ``step`` of ``mode`` (every step of ``mode`` when None), a new set:
    the ``values``' answer where they hold one, else the state's. Call it under the trial
    cache's lock."""
    if values is not None and step is not None:
        found = values.names_at(step, mode)
        if found is not None:
            return found
    if step is None:
        if mode == ModeKeys.GLOBAL:
            return set(state.names)
        return set(state.mode_to_tensors.get(mode, ()))
    g = state.to_global(mode, step)
    if g is None:
        return set()
    return set(state.global_step_to_tensors.get(g, ()))


def select_names(
    names: set[str],
    regex: str | list[Any] | None,
    collection: str | Collection | None,
    *,
    collection_named: Callable[[str], Collection],
    known: Callable[[], set[str]],
    options: TrialOptions,
) -> list[str]:
    """``names`` (sorted), or those of them matching ``regex`` or in ``collection``; ``[]``,
    with a warning, when none does. ``collection_named`` resolves a collection's name,
    ``known()`` gives every name of the trial (a collection's regexes are matched there)."""
    if regex is None and collection is None:
        return sorted(names)
    if regex is not None and collection is not None:
        raise ValueError("Only one of `regex` or `collection` can be passed to this method")
    if collection is not None:
        matched = _in_collection(collection, collection_named, known(), options) & names
    else:
        matched = _matching(names, _flatten([regex]), "tensor_names(regex=...)", options)
    if not matched:
        _no_match(regex, collection)
        return []
    return sorted(matched)


def _no_match(regex: str | list[Any] | None, collection: str | Collection | None) -> None:
    """smdebug's warning for a query that matched nothing, once per query in a process (a rule
    asks the same at every step), then at debug level."""
    said = (repr(regex), repr(_cname(collection)))
    fresh = said not in _SAID and len(_SAID) < _SAID_LIMIT
    if fresh:
        _SAID.add(said)
    log.log(
        logging.WARNING if fresh else logging.DEBUG,
        "tensor_names: no tensor matches regex=%r collection=%r%s",
        regex,
        _cname(collection),
        " (said once; later ones at debug level)" if fresh else "",
    )


_SAID: set[tuple[str, str]] = set()
_SAID_LIMIT = 1000


def _in_collection(
    collection: str | Collection,
    collection_named: Callable[[str], Collection],
    known: set[str],
    options: TrialOptions,
) -> set[str]:
    if isinstance(collection, str):
        coll = collection_named(collection)
    elif isinstance(collection, Collection):
        coll = collection
    else:
        raise TypeError(f"Invalid argument type for collection {collection.__class__}")
    where = f"include_regex of collection {coll.name!r}"
    found = _matching(known, list(coll.include_regex or []), where, options)
    return (set(coll.tensor_names) & known) | found


def _matching(
    names: Iterable[str], patterns: list[Any], what: str, options: TrialOptions
) -> set[str]:
    """The names any of the user's ``patterns`` finds (``re.search``), in linear time
    where RE2 can answer (``evaluator.trial.patterns``)."""
    limit, seconds = options.max_regex_length, options.regex_fallback_timeout
    compiled = [
        compile_pattern(p, what=what, max_length=limit, fallback_seconds=seconds) for p in patterns
    ]
    return matching_names(names, compiled)


def _flatten(items: list[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, (list, tuple, set)):
            out.extend(_flatten(list(item)))
        else:
            out.append(item)
    return out


def _cname(collection: object) -> object:
    return collection.name if isinstance(collection, Collection) else collection


def numeric_suffix(name: str) -> tuple[int, str]:
    """Sort key of ``inputs``/``labels``/``predictions``: the number a name ends with."""
    digits = re.search(r"(\d+)$", name)
    return (int(digits.group(1)) if digits else -1, name)
