"""Reading tensor values: event-file bytes, coalesced reads, prefetch, decoding.

``ValueReader`` turns an index entry (event file, byte range) into an array. All records of an
event file are fetched in one read and kept in the trial cache's byte-bounded LRU; a local
folder is read in the calling thread, other storage through the background loop; the files of
the next steps are fetched ahead while a rule walks the steps in order; a missing or still
growing event file is waited for (``missing_event_file_timeout``, ended as soon as the trial is
complete); one that never comes whole is recorded in ``cache.problems`` and the step skipped.

The hot path (``read_in``): the event file read last is held, and the records a rule read in
the previous file of the same index layout are decoded from it in one loop as soon as it is
read (``RecordLayouts.fast_many``): a rule reads the same tensors at every step, so a value is
then a lookup and a copy. Records that loop cannot read go the checked way, one by one.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import functools
from collections.abc import Hashable
from typing import Any

import numpy as np

from evaluator.errors import ObjectNotFound, TensorUnavailableForStep
from evaluator.formats.keys import event_key as make_event_key
from evaluator.formats.keys import parse_index_key
from evaluator.formats.record_values import RecordLayouts
from evaluator.modes import ModeKeys
from evaluator.storage.base import Storage, SyncRangeReader
from evaluator.trial.cache import TrialCache
from evaluator.trial.entries import FileIndex, Layout, Location
from evaluator.trial.problems import Problem
from evaluator.trial.reductions import compute_reduction
from evaluator.trial.runner import BackgroundLoop
from evaluator.trial.source import TrialSource

__all__ = ["Decoded", "Reading", "ValueReader"]

MiB = 1024 * 1024
_MAX_PREDICTED = 4096  # layouts whose reads are remembered

Reading = tuple[str, int, ModeKeys]
"""What a read is for (tensor name, step, mode): the error names it if the record never comes."""

Decoded = tuple[object, list[np.ndarray | None], set[int], FileIndex | None]
"""The index file read last, decoded: ``(file.starts, views, read, file)``. ``views`` are its
records' values (read-only views of the event file's bytes, None where not decoded yet) by
position in the file; which are decoded when the file is first read is predicted from
``read``, the positions read in the last file of the same layout (a rule reads the same
tensors at every step). One tuple, replaced whole, so that a reader in another thread sees a
file's views with its own ``read``; ``Tensor.value`` reads it for its hot path."""


class ValueReader:
    """Values of one trial's tensors, from its storage through its cache."""

    def __init__(
        self,
        cache: TrialCache,
        source: TrialSource,
        storage: Storage,
        loop: BackgroundLoop,
        *,
        uri: str,
    ) -> None:
        self.cache = cache
        self.source = source
        self.storage = storage
        self.loop = loop
        self.uri = uri
        self._root = uri.rstrip("/")
        self._values = cache.values  # the hot path's caches, one attribute away
        self._raw = cache.raw
        # Checked once: isinstance against a runtime Protocol costs tens of microseconds.
        self._sync_storage = storage if isinstance(storage, SyncRangeReader) else None
        self._layouts = RecordLayouts(source_prefix=f"{self._root}/")
        # The event file read last, held while the reads go on in it (a step's tensors one
        # after the other): one byte-cache lookup per file instead of one per value.
        self._recent: tuple[str | None, int, bytes] = (None, 0, b"")
        self._fast = self._layouts.fast
        # The records of the index file read last, decoded: see ``decoded``.
        self.decoded: Decoded = (None, [], set(), None)
        self._predicted: dict[Layout, list[int]] = {}
        self._inflight: dict[str, concurrent.futures.Future[None]] = {}
        self._prefetched: set[str] = set()  # fetched ahead, not read yet
        self._last_read_step: dict[str, int] = {}  # per worker, to tell a walk from random access

    def read_in(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys, copy: bool = True
    ) -> np.ndarray:
        """The raw value at position ``i`` of index ``file`` (``name`` there, read for ``step``
        of ``mode``): the hot path of ``Tensor.value``. Reads in the file read last come from
        its decoded records; a copy, unless ``copy=False`` (a read-only view of the bytes, for
        a batch read that stacks the arrays anyway)."""
        decoded = self.decoded
        if decoded[0] is file.starts:
            value = decoded[1][i]
            if value is not None:
                decoded[2].add(i)
                return value.copy() if copy else value
        return self._read_in(file, i, name, step, mode, copy)

    def _read_in(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys, copy: bool
    ) -> np.ndarray:
        # Rules in other threads may move ``_recent`` and ``decoded`` on: each is read once.
        event_key, start, length = file.event_key, file.starts[i], file.lengths[i]
        recent = self._recent
        if recent[0] != event_key:
            # The file's first read: its bytes (the records the rule is expected to read of
            # it, and this one) are fetched, or found in the byte cache, and held; they are
            # then decoded below as the reads after it are.
            self._fold_log()
            if not self._raw.max_bytes:  # no byte cache: the general path, with its value cache
                return self.read_value(
                    (event_key, start, length), (name, step, mode), span=self._wanted_span(file, i)
                )
            held, record = self._hold_file(file, i, name, step, mode)
            if held is None:  # not kept (a file larger than the byte cache): this record alone
                assert record is not None
                value = self._layouts.fast(record, 0, len(record), name)
                if value is None:
                    location = (event_key, start, length)
                    value = self._decode_checked(location, record, (name, step, mode), None)
                return value
            recent = held
        decoded = self.decoded
        if decoded[0] is not file.starts:
            decoded = self._begin(file, recent)
            predicted = decoded[1][i]
            if predicted is not None:
                decoded[2].add(i)
                return predicted.copy() if copy else predicted
        at = start - recent[1]
        data = recent[2]
        if at >= 0 and at + length <= len(data):
            view = self._fast(data, at, length, name, False)
            if view is not None:
                decoded[1][i] = view
                decoded[2].add(i)
                return view.copy() if copy else view
        # Not at hand, or a record the learned layouts cannot read yet: the general path.
        value = self.read_value((event_key, start, length), (name, step, mode))
        decoded[2].add(i)
        return value

    def _hold_file(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys
    ) -> tuple[tuple[str | None, int, bytes] | None, memoryview | None]:
        """Make the bytes of ``file``'s event file that hold record ``i`` the file at hand:
        from the byte cache, else fetched (the records predicted to be read there, see
        ``_wanted_span``; never a value from the value cache, which would leave the file
        unread and the reads after it one by one). Returns what is held, or (None, the
        record) when the bytes are not kept (larger than the byte cache, or another thread's
        file is at hand by now); ``TensorUnavailableForStep`` when they never come, as
        ``read_value``."""
        event_key, start, length = file.event_key, file.starts[i], file.lengths[i]
        held: tuple[str | None, int, bytes]
        cached = self._raw.get(event_key)
        if cached is not None:
            lo, data = cached
            if lo <= start and start + length <= lo + len(data):
                held = self._recent = (event_key, lo, data)
                if self._prefetched and event_key in self._prefetched:
                    self._first_use_of_prefetched(event_key)
                return held, None
        # Cached without this record (other records of it, read for other tensors: another
        # window, a loss after the weights): all of them this time, so that a third kind of
        # read finds it there.
        span = None if cached is not None else self._wanted_span(file, i)
        record = self._record_bytes((event_key, start, length), (name, step, mode), span)
        held = self._recent  # set by the fetch when the byte cache keeps the bytes
        return (held, None) if held[0] == event_key else (None, record)

    def _begin(self, file: FileIndex, recent: tuple[str | None, int, bytes]) -> Decoded:
        """Start decoding the records of ``file`` from ``recent``, its event file's bytes: the
        positions read in the last file of its layout are decoded at once."""
        self._fold_log()
        views: list[np.ndarray | None] = [None] * len(file.starts)
        wanted = self._predicted.get(file.layout)
        if wanted:
            self._layouts.fast_many(
                recent[2], recent[1], file.layout.names, file.starts, file.lengths, wanted, views
            )
        decoded = self.decoded = (file.starts, views, set(), file)
        return decoded

    def _fold_log(self) -> None:
        """The reads in the file decoded last become the prediction for its layout."""
        _, _, log, previous = self.decoded
        if previous is not None and log:
            if previous.layout in self._predicted or len(self._predicted) < _MAX_PREDICTED:
                self._predicted[previous.layout] = sorted(log)
            log.clear()

    def _wanted_span(self, file: FileIndex, i: int | None = None) -> tuple[int, int] | None:
        """The bytes of ``file``'s event file that hold the records predicted to be read (and
        record ``i``); None (read them all) when nothing is predicted for its layout, or every
        record is. A rule reading a loss then fetches the loss, not every weight saved beside
        it."""
        wanted = self._predicted.get(file.layout)
        starts, lengths = file.starts, file.lengths
        if not wanted or len(wanted) == len(starts):
            return None
        if i is None:
            i = wanted[0]
        lo = starts[i]
        hi = lo + lengths[i]
        for j in wanted:
            at = starts[j]
            if at < lo:
                lo = at
            if at + lengths[j] > hi:
                hi = at + lengths[j]
        return lo, hi

    def read_value(
        self,
        location: tuple[str, int, int],
        what: Reading,
        layout: Hashable = None,
        span: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """The array of the record at ``location`` (a ``Location``, or a plain tuple of event key,
        start and length, cheaper to build on the hot path of every ``value()``, kept flat).
        ``layout`` names the record's kind for the learned-layout decode (the tensor name; the
        name and the reduction for a saved reduction); by default ``what``'s tensor name.
        ``TensorUnavailableForStep(*what)`` when the record never comes. ``span``: the bytes
        to fetch if the record is not at hand (by default every record of its file)."""
        event_key, start, length = location
        recent = self._recent
        if recent[0] == event_key:
            lo, data = recent[1], recent[2]
        else:
            cached = self._raw.get(event_key)  # the one byte-cache lookup of a file not just read
            if cached is None:
                return self._read_uncached(location, what, layout, span)
            lo, data = cached
            self._recent = (event_key, lo, data)
        at = start - lo
        if at < 0 or at + length > len(data):
            return self._read_uncached(location, what, layout, span)
        if self._prefetched and event_key in self._prefetched:
            self._first_use_of_prefetched(event_key)
        value = self._fast(data, at, length, what[0] if layout is None else layout)
        if value is not None:
            return value
        return self._decode_checked(location, memoryview(data)[at : at + length], what, layout)

    def _read_uncached(
        self,
        location: tuple[str, int, int],
        what: Reading,
        layout: Hashable,
        span: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """A record whose bytes are not in the byte cache: from the value cache if it kept the
        value, else from storage (see ``_record_bytes``)."""
        event_key, start, _ = location
        values = self._values
        if values.max_bytes:
            cached = values.get((event_key, start))
            if cached is not None:
                return cached.copy()
        record = self._record_bytes(location, what, span)
        value = self._layouts.fast(record, 0, len(record), what[0] if layout is None else layout)
        if value is None:
            return self._decode_checked(location, record, what, layout)
        key = (event_key, start)
        if values.max_bytes and values.admit(key):
            values.put(key, value)
            return value.copy()
        return value

    def _decode_checked(
        self, location: tuple[str, int, int], record: memoryview, what: Reading, layout: Hashable
    ) -> np.ndarray:
        """Decode the record the checked way (learning its layout), kept in the value cache
        from its second recent read on: records the learned layout cannot read, and records
        whose event file left the byte cache, are the ones worth keeping decoded."""
        event_key, start, _ = location
        value = self._layouts.decode(
            record, what[0] if layout is None else layout, event_key=event_key, offset=start
        )
        values = self._values
        key = (event_key, start)
        if values.max_bytes and values.admit(key):
            values.put(key, value)
            return value.copy()
        return value

    def computed_reduction(self, loc: Location, name: str, is_abs: bool, value_fn: Any) -> Any:
        key = (loc.event_key, loc.start, name, is_abs)
        cached = self.cache.reductions.get(key)
        if cached is not None:
            return cached[()]
        result = compute_reduction(value_fn(), name, is_abs)
        self.cache.reductions.put(key, np.asarray(result))
        return result

    def _record_bytes(
        self, loc: tuple[str, int, int], what: Reading, span: tuple[int, int] | None = None
    ) -> memoryview:
        """The framed record at ``loc``, absent from the byte cache: a prefetch of its file under
        way is waited for; else ``span`` (by default all records of the file) is fetched in
        one read, and the files of the next steps are fetched ahead (``prefetch_steps``)."""
        event_key, start, length = loc
        end = start + length
        if self.cache.state.loaded_all_steps:
            # A complete trial's damaged file stays damaged: not read again for each tensor.
            had = self.cache.problems.known_size(f"{self._root}/{event_key}")
            if had is not None and end > had:
                raise TensorUnavailableForStep(*what)
        pending = self._inflight.get(event_key)
        if pending is not None:
            concurrent.futures.wait([pending])  # a prefetch of this file is under way
            found = self._cached_span(event_key, start, end)
            if found is not None:
                if event_key in self._prefetched:
                    self._first_use_of_prefetched(event_key)
                return found
        lo, hi = self._span_to_read(event_key, start, end, span)
        data = self._read_now(event_key, lo, hi)
        if data is not None:
            # A read in this thread (a local folder) costs less than handing one to the loop:
            # nothing is fetched ahead.
            self._hold(event_key, lo, data)
            return memoryview(data)[start - lo : end - lo]
        data = self.loop.run(self._fetch(event_key, lo, hi))  # not (completely) there yet
        if data is None or len(data) < end - lo:
            raise self._unreadable(event_key, lo, end, data, what)
        self._hold(event_key, lo, data)
        # Fetched ahead without this record (its predicted records only): read now, so it no
        # longer counts as waiting for its first use.
        self._prefetched.discard(event_key)
        self._prefetch_after(event_key)
        return memoryview(data)[start - lo : end - lo]

    def _hold(self, event_key: str, lo: int, data: bytes) -> None:
        """Keep the file just read at hand for the next reads, if the byte cache keeps it too
        (with no byte cache, nothing is held)."""
        if len(data) + 33 <= self._raw.max_bytes:
            self._recent = (event_key, lo, data)

    def forget(self) -> None:
        """Let go of the file held at hand (the trial is closing)."""
        self._recent = (None, 0, b"")
        self.decoded = (None, [], set(), None)

    def _unreadable(
        self, event_key: str, lo: int, end: int, data: bytes | None, what: Reading
    ) -> TensorUnavailableForStep:
        """Record why the event file did not give the record (``cache.problems``, once per
        file, logged at WARNING), and the error that makes the rule skip the step."""
        problem: Problem = "truncated"
        if not data:
            problem = self.loop.run(self.source.event_file_problem(event_key))
        size = lo + len(data) if data else (lo if problem == "truncated" else 0)
        if problem == "truncated":
            have = f"the file ends at byte {size}" if data else f"the file ends before byte {lo}"
            detail = f"the index file promises bytes up to {end}; {have}"
        elif problem == "empty":
            detail = "the event file has no bytes"
        else:
            detail = "the event file named by the index file does not exist"
        step, worker = parse_index_key(event_key)
        tensor, _, mode = what
        self.cache.problems.note(
            file=f"{self._root}/{event_key}",
            step=step,
            worker=worker,
            problem=problem,
            tensor=tensor,
            mode=mode.name,
            detail=detail,
            trial_complete=self.cache.state.loaded_all_steps,
            size=size,
        )
        return TensorUnavailableForStep(*what)

    def _first_use_of_prefetched(self, event_key: str) -> None:
        """A file fetched ahead is being read: fetch further ahead, keeping the lead."""
        self._prefetched.discard(event_key)
        self._prefetch_after(event_key)

    def _cached_span(self, event_key: str, start: int, end: int) -> memoryview | None:
        span = self.cache.raw.get(event_key)
        if span is not None and span[0] <= start and end <= span[0] + len(span[1]):
            return memoryview(span[1])[start - span[0] : end - span[0]]
        return None

    def _span_to_read(
        self, event_key: str, start: int, end: int, span: tuple[int, int] | None = None
    ) -> tuple[int, int]:
        """``span`` (by default the span of every record of the file) when it holds
        ``[start, end)`` and is not too big for one read, else the record alone."""
        if span is None:
            with self.cache.lock:
                span = self.cache.state.event_spans.get(event_key, (start, end))
        lo, hi = span
        too_big = hi - lo > self.cache.options.max_coalesced_read_mb * MiB
        if too_big or not (lo <= start and end <= hi):
            return start, end
        return lo, hi

    def _read_now(self, event_key: str, lo: int, hi: int) -> bytes | None:
        """The bytes read in the calling thread when the backend can (local folders), else
        None; a missing or short file also gives None, and the async path then waits for it."""
        storage = self._sync_storage
        if storage is None:
            return None
        try:
            data = storage.read_range_sync(event_key, lo, hi)
        except ObjectNotFound:
            return None
        if len(data) < hi - lo:
            return None
        self.cache.raw.put(event_key, (lo, data))
        return data

    async def _fetch(self, event_key: str, lo: int, hi: int) -> bytes | None:
        data = await self.source.read_event_bytes(
            event_key,
            lo,
            hi,
            wait=self.cache.options.missing_event_file_timeout,
            poll_interval=self.cache.options.poll_interval,
            complete=self._trial_complete,
        )
        if data is not None and len(data) >= hi - lo:
            self.cache.raw.put(event_key, (lo, data))
        return data

    def _trial_complete(self) -> bool:
        return self.cache.state.loaded_all_steps

    def _prefetch_after(self, event_key: str) -> None:
        """Fetch the event files of this worker's next saved steps in the background, when the
        rule is walking the steps in order (random access would only waste reads)."""
        depth = self.cache.options.prefetch_steps
        step, worker = parse_index_key(event_key)  # also parses event-file keys
        previous = self._last_read_step.get(worker)
        self._last_read_step[worker] = step
        if depth <= 0 or len(self._inflight) >= 2 * depth:
            return
        with self.cache.lock:
            steps = self.cache.state.all_steps(ModeKeys.GLOBAL)
            at = bisect.bisect_left(steps, step)
            if previous != step and (at == 0 or steps[at - 1] != previous):
                return
            wanted = []
            for s in steps[at + 1 : at + 1 + depth]:
                key = make_event_key(s, worker)
                span = self.cache.state.event_spans.get(key)
                if span is None:
                    continue
                file = self.cache.state.sole_file.get(s)
                if file is not None and file.event_key == key:
                    span = self._wanted_span(file) or span  # what the rule reads there
                wanted.append((key, *span))
        for key, lo, hi in wanted:
            if key in self._inflight or self.cache.raw.get(key) is not None:
                continue
            if hi - lo > self.cache.options.max_coalesced_read_mb * MiB:
                continue
            future = self.loop.submit(self._prefetch(key, lo, hi))
            self._inflight[key] = future
            # Forgotten once done; a callback, so that an already finished one is forgotten too.
            future.add_done_callback(functools.partial(self._forget_prefetch, key))

    def _forget_prefetch(self, key: str, _: concurrent.futures.Future[None]) -> None:
        self._inflight.pop(key, None)

    async def _prefetch(self, key: str, lo: int, hi: int) -> None:
        """Fetch one event file ahead into the byte cache, before the future is done (a read
        waiting for it then finds the bytes). A failure is left to the read that needs the file."""
        try:
            data = await self.source.read_event_bytes(key, lo, hi, wait=0, poll_interval=0)
        except Exception:
            return
        if data is not None and len(data) >= hi - lo:
            self.cache.raw.put(key, (lo, data))
            self._prefetched.add(key)
