"""smdebug's Trial attributes and private helpers that published code reaches for.

smdebug 1.0.34's ``Trial`` is a plain object whose bookkeeping dicts are public in practice:
AWS's model-pruning rule reads ``self.base_trial._global_to_mode[step]``, scripts call
``trial._tensors_for_step(0)``. ``SmdebugAttributes`` (a base of ``Trial``) serves those names
as live, read-only views of ``TrialState``, with smdebug's meaning; docs/compatibility.md,
"smdebug names used by published code", lists each one and where it was seen.

Nothing here changes the trial: the views are read-only proxies of the state's own dicts, so
they are current after every scan.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from evaluator.errors import SMDebugNotImplementedError
from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys
from evaluator.storage.schemes import is_remote, local_path, split_remote
from evaluator.trial.names import _flatten, _matching

if TYPE_CHECKING:
    from evaluator.trial.tensor import Tensor
    from evaluator.trial.trial import Trial

__all__ = ["SmdebugAttributes", "smdebug_index_token"]

log = logging.getLogger("evaluator.trial")

_BEFORE_INDEX = re.compile(r"(.+)/index/.+$")


def smdebug_index_token(trial_path: str, token: str | None) -> str | None:
    """``token`` (a key relative to the trial, ``index/000000000/…json``) as smdebug spells its
    ``last_index_token``: the path of the index file as its reader lists it. Locally that is
    the trial folder joined with the key; on S3 the object key in the bucket (no ``s3://`` and
    no bucket). smdebug rebuilds the key from what precedes the last ``/index/``, so a trailing
    slash on the trial path does not double."""
    if token is None:
        return None
    base = split_remote(trial_path)[1] if is_remote(trial_path) else local_path(trial_path)
    listed = posixpath.join(base, token) if base else token
    found = _BEFORE_INDEX.match(listed)
    return posixpath.join(found.group(1), token) if found else token


class _TensorsByName(Mapping[str, "Tensor"]):
    """smdebug's ``Trial._tensors``: name -> Tensor of every tensor seen so far (no rescan)."""

    def __init__(self, trial: Trial) -> None:
        self._trial = trial

    def __getitem__(self, name: str) -> Tensor:
        if name not in self._trial._state.names:
            raise KeyError(name)
        return self._trial.tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._trial._names_now()))

    def __len__(self) -> int:
        return len(self._trial._state.names)

    def __contains__(self, name: object) -> bool:
        return name in self._trial._state.names


class SmdebugAttributes:
    """smdebug's Trial attributes beyond its documented methods. A base of ``Trial`` only."""

    # smdebug stores these constructor flags; they change nothing here (nor, mostly, there).
    parallel = True
    check = False
    index_mode = True
    last_event_token: str | None = None  # declared by smdebug, never set by it

    if TYPE_CHECKING:  # provided by Trial
        from evaluator.engine.cache import TrialCache
        from evaluator.engine.options import TrialOptions
        from evaluator.engine.source import Source
        from evaluator.engine.state import TrialState
        from evaluator.storage.base import Storage

        _source: Source
        kind: str
        _state: TrialState
        _storage: Storage | None
        _cache: TrialCache
        path: str
        options: TrialOptions

        def _run(self, coro: Any) -> Any: ...

        def tensor(self, tname: str) -> Tensor: ...
        def collection(self, coll_name: str) -> Collection: ...
        def refresh_data(self) -> None: ...
        def maybe_refresh(self, name: str | None = None) -> None: ...

    # ---------------------------------------------------------------- bookkeeping views

    def _names_now(self) -> set[str]:
        """A copy of every tensor name seen, taken under the lock the poller writes under."""
        with self._cache.lock:
            return set(self._state.names)

    def _view_of(self, name: str, table: Mapping[Any, Any]) -> Mapping[Any, Any]:
        """A read-only, live view of one of the state's dicts, the same object every time."""
        views: dict[str, Mapping[Any, Any]] = self.__dict__.setdefault("_smdebug_views", {})
        found = views.get(name)
        if found is None:
            found = views[name] = MappingProxyType(table)
        return found

    @property
    def last_index_token(self) -> str | None:
        """Where the next listing of index files starts, as smdebug spells it: the local path or
        S3 key of the last worker's index file at the last complete step (None before any)."""
        return smdebug_index_token(self.path, self._state.last_index_token)

    @property
    def _global_to_mode(self) -> Mapping[int, tuple[ModeKeys, int]]:
        """Global step -> ``(mode, mode step)`` of every step seen so far (smdebug's dict)."""
        return self._view_of("_global_to_mode", self._state.global_to_mode)

    @property
    def _mode_to_global(self) -> Mapping[ModeKeys, dict[int, int]]:
        """Mode -> {mode step: global step}, for every mode but GLOBAL (smdebug's dict)."""
        return self._view_of("_mode_to_global", self._state.mode_to_global)

    @property
    def workers_for_global_step(self) -> Mapping[int, Any]:
        """Global step -> the workers that have written it (sets, read-only here)."""
        return self._view_of("workers_for_global_step", self._state.workers_for_global_step)

    @property
    def global_step_to_tensors_map(self) -> Mapping[int, Any]:
        """Global step -> the names of the tensors saved there."""
        return self._view_of("global_step_to_tensors_map", self._state.global_step_to_tensors)

    @property
    def mode_to_tensors_map(self) -> Mapping[ModeKeys, set[str]]:
        """Mode (never GLOBAL) -> the names of the tensors saved in it."""
        return self._view_of("mode_to_tensors_map", self._state.mode_to_tensors)

    @property
    def _tensors(self) -> Mapping[str, Tensor]:
        """Name -> ``Tensor`` of every tensor seen so far (smdebug's dict; no rescan)."""
        return _TensorsByName(self)  # type: ignore[arg-type]

    @property
    def logger(self) -> logging.Logger:
        return log

    @property
    def index_reader(self) -> Any:
        """smdebug's index reader, for listing: ``list_index_files``, ``list_event_files``,
        ``path``, ``event_file_retry_limit`` (``evaluator.sources.smdebug.index_listing``)."""
        views: dict[str, Any] = self.__dict__.setdefault("_smdebug_views", {})
        found = views.get("index_reader")
        if found is None:
            retries = int(self.options.missing_event_file_timeout // 2)
            listing = getattr(self._source, "index_listing", None)
            if listing is None:  # smdebug's attribute: only smdebug output has index files
                raise SMDebugNotImplementedError(
                    f"index_reader lists smdebug's index files; this trial is {self.kind!r}"
                )
            found = views["index_reader"] = listing(self.path, self._run, retry_limit=retries)
        return found

    @property
    def trial_dir(self) -> str:
        """smdebug's LocalTrial keeps its folder here; the trial's path, local or S3."""
        return self.path

    @property
    def bucket_name(self) -> str:
        """An S3 trial's bucket (smdebug's S3Trial attribute)."""
        if not is_remote(self.path):
            raise AttributeError("bucket_name: this trial is not on S3")
        return split_remote(self.path)[0]

    @property
    def prefix_name(self) -> str:
        """An S3 trial's prefix, ending with ``/`` as smdebug keeps it (S3Trial attribute)."""
        if not is_remote(self.path):
            raise AttributeError("prefix_name: this trial is not on S3")
        return posixpath.join(split_remote(self.path)[1], "")

    @property
    def _incomplete_wait_for_step_window(self) -> int:
        return self.options.incomplete_step_window

    @property
    def _training_end_delay_refresh(self) -> float:
        return self.options.training_end_delay

    # ---------------------------------------------------------------- private helpers

    def refresh_tensor(self, tname: str, steps: Any = None) -> None:
        """smdebug refreshes the whole trial for one tensor; so do we."""
        self.refresh_data()

    def _all_steps(self, mode: ModeKeys = ModeKeys.GLOBAL) -> list[int]:
        """Every step of ``mode``, complete or not (``steps(mode, show_incomplete_steps=True)``)."""
        self.maybe_refresh()
        with self._cache.lock:
            return list(self._state.all_steps(mode))

    def _global_step_currently(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The global step of ``mode_step`` of ``mode`` as known now (no rescan), or None."""
        return self._state.to_global(mode, mode_step)

    def _mode_modestep_currently(self, global_step: int) -> tuple[ModeKeys, int] | None:
        """``(mode, mode step)`` of ``global_step`` as known now (no rescan), or None."""
        return self._state.global_to_mode.get(global_step)

    def _tensors_for_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[str]:
        """Names saved at ``step`` of ``mode`` (no rescan). As smdebug's, an unknown mode step
        of TRAIN/EVAL/PREDICT raises KeyError; an unknown global step gives ``[]``."""
        if mode != ModeKeys.GLOBAL:
            step = self._state.mode_to_global[mode][step]
        return sorted(self._state.global_step_to_tensors.get(step, ()))

    def _tensors_matching_regex(self, regex_list: Any) -> set[str]:
        """Names seen so far that any of the regexes finds (``re.search``)."""
        patterns = _flatten(regex_list if isinstance(regex_list, list) else [regex_list])
        return _matching(self._names_now(), patterns, "regex", self.options)

    def _tensors_in_collection(self, collection: str | Collection) -> set[str]:
        """The collection's (looked up by name) tensor names, saved or not, and the names seen
        so far that its include regexes find."""
        coll = self.collection(self._parse_collection_name(collection))
        found = set(coll.tensor_names)
        if coll.include_regex:
            found |= self._tensors_matching_regex(list(coll.include_regex))
        return found

    @staticmethod
    def _parse_collection_name(collection: str | Collection) -> str:
        if isinstance(collection, Collection):
            return collection.name
        if type(collection) is str:
            return collection
        raise TypeError(f"Invalid argument type for collection {collection.__class__}")
