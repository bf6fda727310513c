"""Reading tensor values: event-file bytes, coalesced reads, prefetch, decoding.

``ValueReader`` turns an index entry (event file, byte range) into an array. All records of an
event file are fetched in one read and kept in the trial cache's byte-bounded LRU; a local
folder is read in the calling thread, other storage through the background loop; the files of
the next steps are fetched ahead while a rule walks the steps in order; a missing or still
growing event file is waited for (``missing_event_file_timeout``).
"""

from __future__ import annotations

import bisect
import concurrent.futures
from typing import Any

import numpy as np

from evaluator.errors import ObjectNotFound, TensorUnavailableForStep
from evaluator.formats.events import decode_record_value
from evaluator.formats.keys import event_key as make_event_key
from evaluator.formats.keys import parse_index_key
from evaluator.modes import ModeKeys
from evaluator.storage.base import Storage, SyncRangeReader
from evaluator.trial.cache import TrialCache
from evaluator.trial.reductions import compute_reduction
from evaluator.trial.runner import BackgroundLoop
from evaluator.trial.source import TrialSource
from evaluator.trial.state import Location

__all__ = ["ValueReader"]

MiB = 1024 * 1024


class ValueReader:
    """Values of one trial's tensors, from its storage through its cache."""

    def __init__(self, cache: TrialCache, source: TrialSource, storage: Storage,
                 loop: BackgroundLoop, *, uri: str) -> None:
        self.cache = cache
        self.source = source
        self.storage = storage
        self.loop = loop
        self.uri = uri
        self._inflight: dict[str, concurrent.futures.Future[bytes | None]] = {}
        self._prefetched: set[str] = set()  # fetched ahead, not read yet
        self._last_read_step: dict[str, int] = {}  # per worker, to tell a walk from random access

    def read_value(self, event_key: str, start: int, length: int, tname: str, step: int,
                    mode: ModeKeys) -> np.ndarray:
        """The array of the record at ``[start, start + length)`` of ``event_key``: the hot path
        of every ``value()``, kept flat."""
        values = self.cache.values
        if values.max_bytes:
            cached = values.get((event_key, start))
            if cached is not None:
                return cached.copy()
        end = start + length
        span = self.cache.raw.get(event_key)
        if span is not None and span[0] <= start and end <= span[0] + len(span[1]):
            lo = span[0]
            record = memoryview(span[1])[start - lo: end - lo]
            if event_key in self._prefetched:  # first use of a prefetched file: keep ahead
                self._prefetched.discard(event_key)
                self._prefetch_after(event_key)
        else:
            record = self._record_bytes(Location(event_key, start, length), tname, step, mode)
        value = decode_record_value(record, source=f"{self.uri.rstrip('/')}/{event_key}",
                                    offset=start)
        if values.max_bytes and values.admit((event_key, start)):
            values.put((event_key, start), value)
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

    def _record_bytes(self, loc: Location, tname: str, step: int, mode: ModeKeys) -> memoryview:
        """The framed record at ``loc``: all records of its event file are fetched in one read,
        and the files of the next steps are fetched ahead (``prefetch_steps``)."""
        end = loc.start + loc.length
        found = self._cached_span(loc.event_key, loc.start, end)
        if found is None:
            pending = self._inflight.get(loc.event_key)
            if pending is not None:
                pending.result()  # a prefetch of this file is under way: wait for it
                found = self._cached_span(loc.event_key, loc.start, end)
        if found is not None:
            if loc.event_key in self._prefetched:  # first use of a prefetched file: keep ahead
                self._prefetched.discard(loc.event_key)
                self._prefetch_after(loc.event_key)
            return found
        lo, hi = self._span_to_read(loc.event_key, loc.start, end)
        data = self._read_now(loc.event_key, lo, hi)
        if data is None:  # not readable in this thread, or not (completely) there yet
            data = self.loop.run(self._fetch(loc.event_key, lo, hi))
        if data is None or len(data) < end - lo:
            raise TensorUnavailableForStep(tname, step, mode)
        self._prefetch_after(loc.event_key)
        return memoryview(data)[loc.start - lo: end - lo]

    def _cached_span(self, event_key: str, start: int, end: int) -> memoryview | None:
        span = self.cache.raw.get(event_key)
        if span is not None and span[0] <= start and end <= span[0] + len(span[1]):
            return memoryview(span[1])[start - span[0]: end - span[0]]
        return None

    def _span_to_read(self, event_key: str, start: int, end: int) -> tuple[int, int]:
        with self.cache.lock:
            lo, hi = self.cache.state.event_spans.get(event_key, (start, end))
        if hi - lo > self.cache.options.max_coalesced_read_mb * MiB or not (lo <= start and end <= hi):
            return start, end
        return lo, hi

    def _read_now(self, event_key: str, lo: int, hi: int) -> bytes | None:
        """The bytes read in the calling thread when the backend can (local folders), else
        None; a missing or short file also gives None, and the async path then waits for it."""
        if not isinstance(self.storage, SyncRangeReader):
            return None
        try:
            data = self.storage.read_range_sync(event_key, lo, hi)
        except ObjectNotFound:
            return None
        if len(data) < hi - lo:
            return None
        self.cache.raw.put(event_key, (lo, data))
        return data

    async def _fetch(self, event_key: str, lo: int, hi: int) -> bytes | None:
        data = await self.source.read_event_bytes(
            event_key, lo, hi, wait=self.cache.options.missing_event_file_timeout,
            poll_interval=self.cache.options.poll_interval)
        if data is not None and len(data) >= hi - lo:
            self.cache.raw.put(event_key, (lo, data))
        return data

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
            after = steps[at + 1: at + 1 + depth]
            wanted = [(k, *self.cache.state.event_spans[k]) for k in
                      (make_event_key(s, worker) for s in after)
                      if k in self.cache.state.event_spans]
        for key, lo, hi in wanted:
            if key in self._inflight or self.cache.raw.get(key) is not None:
                continue
            if hi - lo > self.cache.options.max_coalesced_read_mb * MiB:
                continue
            future = self.loop.submit(self.source.read_event_bytes(key, lo, hi, wait=0, poll_interval=0))
            self._inflight[key] = future
            future.add_done_callback(lambda f, key=key, lo=lo, hi=hi: self._store_prefetch(key, lo, hi, f))

    def _store_prefetch(self, key: str, lo: int, hi: int, future: concurrent.futures.Future[bytes | None]) -> None:
        try:
            data = None if future.cancelled() or future.exception() else future.result()
            if data is not None and len(data) >= hi - lo:
                self.cache.raw.put(key, (lo, data))
                self._prefetched.add(key)
        finally:
            self._inflight.pop(key, None)
