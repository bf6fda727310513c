"""Fetching ahead: the event files of the next saved steps, read while a rule works on this one.

``Prefetcher`` watches which step each worker's reads are at; when a rule walks the steps in
order it fetches the next ``prefetch_steps`` event files (the records the rule is predicted
to read there) into the byte cache on the background loop, and keeps that lead as each
prefetched file is first used. Random access fetches nothing ahead.

``RecordsAhead`` does the same on a local folder for records too large to be held with their
file (megabyte tensors): when such a record is read alone, the record of the same tensor at
the worker's next saved step is read in a second thread (file reads and the rule's numpy work
release the GIL, so the two cores overlap), and the read that wants it takes it from there.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any, cast

from evaluator.engine.cache import TrialCache
from evaluator.engine.runner import BackgroundLoop
from evaluator.formats.keys import event_key as make_event_key
from evaluator.formats.keys import parse_index_key
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.entries import FileIndex
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.state import IndexedState

__all__ = ["Prefetcher", "RecordsAhead"]

MiB = 1024 * 1024
AHEAD_MIN_BYTES = 1 * MiB  # smaller records cost less to read than a thread hop to save


class Prefetcher:
    """Event files fetched ahead of one trial's reads. ``span_of(file)`` gives the bytes of an
    index file's event file the reads are predicted to want there (None: all its records)."""

    def __init__(
        self,
        cache: TrialCache,
        source: SmdebugSource,
        loop: BackgroundLoop,
        span_of: Callable[[FileIndex], tuple[int, int] | None],
    ) -> None:
        self.cache = cache
        self.source = source
        self.loop = loop
        self._span_of = span_of
        self.inflight: dict[str, concurrent.futures.Future[None]] = {}
        self.fetched: set[str] = set()  # fetched ahead, not read yet
        self._last_read_step: dict[str, int] = {}  # per worker, to tell a walk from random access

    def first_use(self, event_key: str) -> None:
        """``event_key``'s bytes are being read: if it was fetched ahead, fetch further ahead,
        keeping the lead."""
        if self.fetched and event_key in self.fetched:
            self.fetched.discard(event_key)
            self.after(event_key)

    def after(self, event_key: str) -> None:
        """Fetch the event files of this worker's next saved steps in the background, when the
        rule is walking the steps in order (random access would only waste reads)."""
        depth = self.cache.options.prefetch_steps
        step, worker = parse_index_key(event_key)  # also parses event-file keys
        previous = self._last_read_step.get(worker)
        self._last_read_step[worker] = step
        if depth <= 0 or len(self.inflight) >= 2 * depth:
            return
        state = cast(IndexedState, self.cache.state)  # SmdebugSource.make_state's
        with self.cache.lock:
            steps = state.all_steps(ModeKeys.GLOBAL)
            at = bisect.bisect_left(steps, step)
            if previous != step and (at == 0 or steps[at - 1] != previous):
                return
            wanted = []
            for s in steps[at + 1 : at + 1 + depth]:
                key = make_event_key(s, worker)
                span = state.event_spans.get(key)
                if span is None:
                    continue
                file = state.sole_file.get(s)
                if file is not None and file.event_key == key:
                    span = self._span_of(file) or span  # what the rule reads there
                wanted.append((key, *span))
        limit = self.cache.options.max_coalesced_read_mb * MiB
        for key, lo, hi in wanted:
            if key in self.inflight or self.cache.raw.get(key) is not None or hi - lo > limit:
                continue
            future = self.loop.submit(self._fetch(key, lo, hi))
            self.inflight[key] = future
            # Forgotten once done; a callback, so that an already finished one is forgotten too.
            future.add_done_callback(functools.partial(self._forget, key))

    def _forget(self, key: str, _: concurrent.futures.Future[None]) -> None:
        self.inflight.pop(key, None)

    async def _fetch(self, key: str, lo: int, hi: int) -> None:
        """Fetch one event file ahead into the byte cache, before the future is done (a read
        waiting for it then finds the bytes). A failure is left to the read that needs the file."""
        try:
            data = await self.source.read_event_bytes(key, lo, hi, wait=0, poll_interval=0)
        except Exception:
            return
        if data is not None and len(data) >= hi - lo:
            self.cache.raw.put(key, (lo, data))
            self.fetched.add(key)


class RecordsAhead:
    """Large records of a local folder read ahead in one worker thread (see the module). At
    most ``max_bytes`` are held ahead; the oldest read ahead is dropped first."""

    def __init__(self, cache: TrialCache, read: Callable[[str, int, int], bytes], max_bytes: int):
        self.cache = cache
        self._read = read  # a SyncRangeReader's read_range_sync
        self._max_bytes = max_bytes
        self._ahead: dict[tuple[str, int], tuple[concurrent.futures.Future[bytes], int]] = {}
        self._bytes = 0
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.hits = 0  # reads answered by a read ahead

    def take(self, event_key: str, start: int, end: int) -> bytes | None:
        """The bytes ``[start, end)`` of ``event_key`` if they were read ahead (waiting for a
        read under way), else None; a short or failed read ahead also gives None."""
        found = self._ahead.pop((event_key, start), None)
        if found is None:
            return None
        future, size = found
        self._bytes -= size
        try:
            data = future.result()
        except Exception:  # left to the read that needs it, which says what is wrong
            return None
        if len(data) != end - start or len(data) != size:
            return None
        self.hits += 1
        return data

    def after(self, event_key: str, what: tuple[str, int, Any]) -> None:
        """``what``'s tensor was just read alone from ``event_key``: read its record at the
        worker's next saved step (the one-worker step's index file) ahead."""
        step, worker = parse_index_key(event_key)
        state = cast(IndexedState, self.cache.state)  # SmdebugSource.make_state's
        with self.cache.lock:
            steps = state.all_steps(ModeKeys.GLOBAL)
            at = bisect.bisect_right(steps, step)
            file = state.sole_file.get(steps[at]) if at < len(steps) else None
        if file is None or file.worker != worker:
            return
        i = file.layout.position.get(what[0])
        if i is None:
            return
        key, start, size = file.event_key, file.starts[i], file.lengths[i]
        if (key, start) in self._ahead or size < AHEAD_MIN_BYTES or size > self._max_bytes:
            return
        while self._ahead and self._bytes + size > self._max_bytes:
            oldest = next(iter(self._ahead))
            self._bytes -= self._ahead.pop(oldest)[1]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, "records-ahead")
        self._ahead[(key, start)] = (self._pool.submit(self._read, key, start, start + size), size)
        self._bytes += size

    def close(self) -> None:
        """Drop what is held ahead and let the worker thread end."""
        self._ahead.clear()
        self._bytes = 0
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
