"""``Trial``: smdebug's synchronous Trial API, served from the trial cache.

The facade holds no format or storage logic: the format's ``Source`` (async, on the background
loop) reads files and opens the ``ValueStore`` that answers values, ``TrialState`` keeps the
bookkeeping, the caches keep bytes and decoded values. It never asks which format answered.
Method names, argument order, return types and exceptions follow smdebug 1.0.34; the deliberate
differences are listed in docs/compatibility.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

from evaluator.engine.cache import TrialCache
from evaluator.engine.columns import Columns
from evaluator.engine.options import TrialOptions
from evaluator.engine.poller import Poller
from evaluator.engine.runner import BackgroundLoop, get_loop
from evaluator.engine.source import Source
from evaluator.engine.view import TrialView
from evaluator.errors import (
    TensorUnavailable,
)
from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys, StepState, WriterStep
from evaluator.storage.base import Storage, SyncRangeReader
from evaluator.trial.names import names_at, numeric_suffix, select_names
from evaluator.trial.smdebug_attrs import SmdebugAttributes
from evaluator.trial.step_waits import StepWaits
from evaluator.trial.tensor import Tensor

__all__ = ["Trial"]

log = logging.getLogger("evaluator.trial")

MiB = 1024 * 1024


class Trial(SmdebugAttributes, StepWaits):
    """The debug output of one training job, local or on S3. Create it with ``create_trial``.
    smdebug's other attributes (``last_index_token``, ``_global_to_mode`` …) come from
    ``SmdebugAttributes``; waiting for steps (``wait_for_steps``, ``next_step``) from
    ``StepWaits``."""

    def __init__(
        self,
        name: str,
        path: str,
        storage: Storage | None,
        *,
        options: TrialOptions,
        range_steps: tuple[int | None, int | None] | None = None,
        cache: bool = False,
        loop: BackgroundLoop | None = None,
        source: Source,
    ) -> None:
        self.name = name
        self.path = path
        self.range_steps = range_steps
        self.cache = cache
        self.options = options
        self.dynamic_refresh = True
        self._storage = storage
        self._loop = loop or get_loop()
        self._source = source  # the format's (``evaluator.sources``), over ``storage``
        #: The format found at ``path``: ``"smdebug"``, ``"tensorboard"`` or a plug-in's name.
        self.kind: str = source.kind
        self._tensor_objects: dict[str, Tensor] = {}
        self._closed = False
        try:
            loaded = self._run(
                self._source.load_collections(
                    timeout=options.collection_wait_timeout,
                    poll_interval=options.poll_interval,
                    wait_log_interval=options.wait_log_interval,
                )
            )
        except BaseException:  # a failure or a stop before the trial exists: nobody else
            self._release_storage()  # would close its connections (aiohttp's "Unclosed ...")
            raise
        self.collection_manager = loaded.manifest
        self._collections: dict[str, Collection] = dict(loaded.manifest.collections)
        state = source.make_state(
            num_workers=loaded.manifest.num_workers,
            workers=loaded.workers,
            incomplete_step_window=options.incomplete_step_window,
            range_steps=range_steps,
        )
        local = isinstance(storage, SyncRangeReader)  # a folder: the OS keeps its bytes
        self._cache = TrialCache(state, options, uri=path, local=local)
        self._state = state
        self._poller = Poller(self._cache, self._source, options, range_steps)
        self._view = TrialView(state, self._cache.lock, self.maybe_refresh)
        self._values = self._view.values = source.open_values(self._cache, self._view, self._loop)
        self.refresh_data()

    # ---------------------------------------------------------------- plumbing

    def _run(self, coro: Any) -> Any:
        return self._loop.run(coro)

    def _release_storage(self) -> None:
        try:
            self._loop.run(self._source.aclose(), timeout=5)
        except Exception:  # closing must not hide why the trial could not be opened
            log.debug("closing the storage of %s failed", self.path, exc_info=True)

    def close(self) -> None:
        """Release the storage's connections and the caches. The trial is unusable afterwards."""
        if self._closed:
            return
        self._closed = True
        self._poller.stop()
        self._values.close()
        self._cache.clear()
        self._run(self._source.aclose())

    def __enter__(self) -> Trial:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Trial name={self.name!r} path={self.path!r} "
            f"steps={len(self._state.global_to_mode)} "
            f"workers={self.num_workers} loaded_all_steps={self.loaded_all_steps}>"
        )

    # smdebug exposes these as attributes
    @property
    def num_workers(self) -> int:
        return self._state.num_workers

    @property
    def worker_set(self) -> set[str]:
        return self._state.worker_set

    @property
    def loaded_all_steps(self) -> bool:
        return self._state.loaded_all_steps

    @property
    def last_complete_step(self) -> int:
        return self._state.last_complete_step

    @property
    def tensorboard_mapping(self) -> Any:
        """For a TensorBoard log, how it was mapped (``TensorBoardMapping``: run, folders and
        their modes, step rule, collections); None for other formats."""
        return getattr(self._source, "mapping", None)

    def describe(self) -> dict[str, Any]:
        """What the format says of itself (``Source.describe``): ``kind``, a sentence, and
        where they apply ``mapping`` and ``end_marker``."""
        return self._source.describe()

    @property
    def data_problems(self) -> list[dict[str, Any]]:
        """Event files that could not give the records their index files promise, each met
        once, the first 100 in the order met (``data_problem_count`` counts them all): dicts
        of ``file`` (full URI), ``step`` (global), ``worker``, ``problem`` (``"missing"``,
        ``"empty"`` or ``"truncated"``; ``"corrupt"``: a TensorBoard record whose checksum is
        wrong, after which the file is not read, or whose length points past the file's end,
        after which reading resumes at the next valid record, ``step`` then the writer's last
        step read before it; ``"step_too_large"``: TensorBoard records at steps past 2**62 - 1,
        left out; ``"unreadable"``: a TensorBoard record that is no valid Event or is over a
        bound, such as a histogram's bucket count, skipped), ``offset`` (TensorBoard: where the bad record starts, when known),
        ``tensor`` and ``mode`` of the first read that met it, ``detail`` (a sentence) and
        ``trial_complete`` (whether the trial was complete then, or the wait for the file
        merely ran out). The steps were skipped."""
        return self._cache.problems.listed()

    @property
    def data_problem_count(self) -> int:
        """How many event files could not give their records (see ``data_problems``)."""
        return self._cache.problems.count

    # ---------------------------------------------------------------- refreshing

    def refresh_data(self) -> None:
        """Scan storage now: read the index files written since the last scan."""
        self._run(self._poller.poll_once())

    def maybe_refresh(self, name: str | None = None) -> None:
        """Scan for new data, unless every step is loaded, refreshing is switched off, or the
        background poller is already keeping the trial fresh."""
        if self._state.loaded_all_steps or not self.dynamic_refresh or self._poller.running:
            return
        self.refresh_data()

    def start_polling(self) -> None:
        """Keep the trial fresh from a background poller (the evaluator does this for live
        jobs); access-triggered rescans stop, waits wake as soon as a poll brings news."""
        self._poller.start(self._loop)

    def training_ended(self) -> bool:
        """Whether ``training_job_end.ts`` exists (smdebug's ``has_training_ended``)."""
        return bool(self._run(self._source.training_ended()))

    # ---------------------------------------------------------------- tensors

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeKeys = ModeKeys.GLOBAL,
        regex: str | list[Any] | None = None,
        collection: str | Collection | None = None,
    ) -> list[str]:
        """Sorted names of saved tensors, optionally at one step, matching regexes or in a
        collection. A mode or mode step never seen gives ``[]`` (smdebug raises KeyError)."""
        self.maybe_refresh()
        with self._cache.lock:
            names = names_at(self._state, step, mode, self._values)
        return select_names(
            names,
            regex,
            collection,
            collection_named=self.collection,
            known=self._known_names,
            options=self.options,
        )

    def _known_names(self) -> set[str]:
        with self._cache.lock:
            return set(self._state.names)

    def tensor(self, tname: str) -> Tensor:
        """The ``Tensor`` named ``tname``; ``TensorUnavailable`` if it was never saved."""
        found = self._tensor_objects.get(tname)
        if found is not None:
            return found
        if tname not in self._state.names:
            self.maybe_refresh(tname)
            if tname not in self._state.names:
                raise TensorUnavailable(tname)
        found = Tensor(tname, self, cache=self.cache, view=self._view)
        self._tensor_objects[tname] = found
        return found

    def columns(
        self,
        names: Iterable[str],
        steps: Iterable[int],
        mode: ModeKeys = ModeKeys.GLOBAL,
        *,
        max_bytes: int = 16 * MiB,
    ) -> Columns:
        """Ours: the raw values of ``names`` over ``steps`` (of ``mode``), stacked per tensor,
        read in one walk through the steps until ``max_bytes`` are held (see
        ``evaluator.engine.columns``: what is left out, and how reads are counted)."""
        known = [n for n in dict.fromkeys(names) if n in self._state.names]
        return self._values.columns(known, list(steps), mode, max_bytes)

    def has_tensor(self, tname: str) -> bool:
        if tname not in self._state.names:
            self.maybe_refresh(tname)
        return tname in self._state.names

    def inputs(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[np.ndarray]:
        return self._values_by_regex("inputs*", step, mode)

    def labels(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[np.ndarray]:
        return self._values_by_regex("labels*", step, mode)

    def predictions(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> list[np.ndarray]:
        return self._values_by_regex("predictions*", step, mode)

    def _values_by_regex(self, regex: str, step: int, mode: ModeKeys) -> list[np.ndarray]:
        names = sorted(self.tensor_names(step=step, mode=mode, regex=regex), key=numeric_suffix)
        return [self.tensor(n).value(step, mode=mode) for n in names]

    # ---------------------------------------------------------------- steps and modes

    def steps(
        self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """Sorted steps of ``mode``: global steps for GLOBAL, mode steps otherwise."""
        self.maybe_refresh()
        with self._cache.lock:
            return self._state.steps(mode, show_incomplete_steps)

    def newest_step(self) -> int | None:
        """The highest global step seen so far, complete or not (for progress and lag)."""
        with self._cache.lock:
            steps = self._state.all_steps(ModeKeys.GLOBAL)
            return steps[-1] if steps else None

    def modes(self) -> Any:
        """Modes seen so far, in order of first appearance (never GLOBAL), as dict keys."""
        return self._state.mode_to_global.keys()

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        found = self._state.global_to_mode.get(global_step)
        if found is None:
            self.maybe_refresh()
            found = self._state.global_to_mode.get(global_step)
        return found if found is not None else (None, None)

    @property
    def maps_writer_steps(self) -> bool:
        """Whether the format may show a global step as another step (``writer_step``)."""
        return getattr(self._source, "writer_step", None) is not None

    def writer_step(self, global_step: int) -> WriterStep:
        """The step the writer logged for ``global_step``, as every output shows it
        (docs/compatibility.md, "Steps users see"): a format whose global steps are not its
        writer's (a TensorBoard run with phases) answers with its mode and the logged step;
        every other trial shows the global step itself."""
        mapped = getattr(self._source, "writer_step", None)  # optional in ``Source``
        found = mapped(global_step) if mapped is not None else None
        return WriterStep(global_step) if found is None else WriterStep(found[1], found[0])

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        if mode == ModeKeys.GLOBAL:
            return mode_step
        g = self._state.to_global(mode, mode_step)
        if g is None:
            self.maybe_refresh()
            g = self._state.to_global(mode, mode_step)
        return g

    def workers(self) -> list[str]:
        """Worker names, from the collection files' names."""
        self.maybe_refresh()
        with self._cache.lock:
            return sorted(self._state.worker_set)

    def has_passed_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        """Whether ``step`` is readable (AVAILABLE), was skipped (UNAVAILABLE), or may still
        come (NOT_YET_AVAILABLE)."""
        self.maybe_refresh()
        with self._cache.lock:
            return self._state.has_passed_step(step, mode)

    # ---------------------------------------------------------------- collections

    def collections(self) -> dict[str, Collection]:
        return self._collections

    def collection(self, coll_name: str) -> Collection:
        """The collection named ``coll_name``; an empty one is created for an unknown name."""
        found = self._collections.get(coll_name)
        if found is None:
            found = self._collections[coll_name] = Collection(coll_name)
        return found
