"""Event-file bytes: the file at hand, the byte cache, coalesced reads, waiting for a file.

``EventBytes`` gives the reader the framed bytes of a record. All records of an event file
(or those a rule is predicted to read there) are fetched in one read and kept in the trial
cache's byte-bounded LRU; the file read last is held at hand (``recent``) while the reads go
on in it, so a step's tensors cost one byte-cache lookup, not one each. A local folder is read
in the calling thread, other storage through the background loop, which also waits for a
missing or still growing event file (``missing_event_file_timeout``, ended as soon as the trial
is complete); one that never comes whole is recorded in ``cache.problems`` and the read fails
with ``TensorUnavailableForStep``, so the rule skips the step.
"""

from __future__ import annotations

import concurrent.futures
from typing import cast

from evaluator.engine.cache import TrialCache
from evaluator.engine.problems import Problem
from evaluator.engine.runner import BackgroundLoop
from evaluator.errors import CorruptRecordError, ObjectNotFound, TensorUnavailableForStep
from evaluator.formats.keys import parse_index_key
from evaluator.formats.tfrecord import HEADER, HEADER_SIZE, RECORD_OVERHEAD, length_crc
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.prefetch import AHEAD_MIN_BYTES, Prefetcher, RecordsAhead
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.state import IndexedState
from evaluator.storage.base import Storage, SyncRangeReader

__all__ = ["EventBytes", "Held", "Reading", "Record"]

MiB = 1024 * 1024

Reading = tuple[str, int, ModeKeys]
"""What a read is for (tensor name, step, mode): the error names it if the record never comes."""

Held = tuple[str | None, int, bytes]
"""An event file's bytes at hand: (event key, file offset of the first byte, the bytes)."""

Record = tuple[bytes, int]
"""A record's bytes: a buffer holding it and the record's offset in that buffer (the buffer
read, or kept in the byte cache; never a copy of the record)."""

_NOTHING: Held = (None, 0, b"")
#: A record the index file says is larger than this has its own length field read first.
CHECKED_ABOVE = 16 << 20


class EventBytes:
    """The event-file bytes of one trial, from its storage through its byte cache."""

    def __init__(
        self,
        cache: TrialCache,
        source: SmdebugSource,
        storage: Storage,
        loop: BackgroundLoop,
        prefetch: Prefetcher,
        *,
        root: str,
    ) -> None:
        self.cache = cache
        self.source = source
        self._storage = storage
        self.loop = loop
        self.prefetch = prefetch
        self._root = root
        self._raw = cache.raw
        # Checked once: isinstance against a runtime Protocol costs tens of microseconds.
        self._sync_storage = storage if isinstance(storage, SyncRangeReader) else None
        # A local folder's large record costs about as much to read again (the page cache) as
        # to copy out of the decoded-value cache: it is not kept decoded.
        self.keep_decoded_below = AHEAD_MIN_BYTES if self._sync_storage is not None else None
        self.ahead: RecordsAhead | None = None
        if self._sync_storage is not None and cache.options.prefetch_steps > 0:
            limit = int(2 * cache.options.max_coalesced_read_mb * MiB)
            self.ahead = RecordsAhead(cache, self._sync_storage.read_range_sync, limit)
        # The event file read last, held while the reads go on in it (a step's tensors one
        # after the other): one byte-cache lookup per file instead of one per value.
        self.recent: Held = _NOTHING

    def cached(self, event_key: str) -> Held | None:
        """``event_key``'s bytes from the file at hand or the byte cache (then held), or None."""
        recent = self.recent
        if recent[0] == event_key:
            return recent
        found = self._raw.get(event_key)
        if found is None:
            return None
        held: Held = (event_key, found[0], found[1])
        self.recent = held
        return held

    def hold_file(
        self, location: tuple[str, int, int], what: Reading, span: tuple[int, int] | None
    ) -> tuple[Held | None, Record | None]:
        """Make the bytes of the event file that hold the record at ``location`` the file at
        hand: from the byte cache, else fetched (``span``: the records predicted to be read
        there; never a value from the value cache, which would leave the file unread and the
        reads after it one by one). Returns what is held, or (None, the ``Record``) when the bytes
        are not kept (larger than the byte cache, or another thread's file is at hand by now);
        ``TensorUnavailableForStep`` when they never come."""
        event_key, start, length = location
        cached = self._raw.get(event_key)
        if cached is not None:
            lo, data = cached
            if lo <= start and start + length <= lo + len(data):
                held: Held = (event_key, lo, data)
                self.recent = held
                self.prefetch.first_use(event_key)
                return held, None
        # Cached without this record (other records of it, read for other tensors: another
        # window, a loss after the weights): all of them this time, so that a third kind of
        # read finds it there.
        record = self.record(location, what, None if cached is not None else span)
        now = self.recent  # set by the fetch when the byte cache keeps the bytes
        return (now, None) if now[0] == event_key else (None, record)

    def record(
        self, loc: tuple[str, int, int], what: Reading, span: tuple[int, int] | None = None
    ) -> Record:
        """The framed record at ``loc`` (a ``Record``: no bytes are copied), absent from the byte cache: a prefetch of its file under
        way is waited for; else ``span`` (by default all records of the file) is fetched in
        one read, and the files of the next steps are fetched ahead (``prefetch_steps``)."""
        event_key, start, length = loc
        end = start + length
        if self.cache.state.loaded_all_steps:
            # A complete trial's damaged file stays damaged: not read again for each tensor.
            had = self.cache.problems.known_size(f"{self._root}/{event_key}")
            if had is not None and end > had:
                raise TensorUnavailableForStep(*what)
        pending = self.prefetch.inflight.get(event_key)
        if pending is not None:
            concurrent.futures.wait([pending])  # a prefetch of this file is under way
            found = self._cached_span(event_key, start, end)
            if found is not None:
                self.prefetch.first_use(event_key)
                return found
        lo, hi = self._span_to_read(event_key, start, end, span)
        if length > CHECKED_ABOVE:
            self._check_length(event_key, start, length)
        ahead = self.ahead
        if ahead is not None and (lo, hi) == (start, end) and length >= AHEAD_MIN_BYTES:
            # A large record read alone (its file is too big to hold): the same tensor's record
            # at the next step is read in a second thread meanwhile.
            data = ahead.take(event_key, start, end)
            if data is not None:
                self._raw.put(event_key, (lo, data))
            else:
                data = self._read_now(event_key, lo, hi)
            if data is not None:
                ahead.after(event_key, what)
                self._hold(event_key, lo, data)
                return data, 0
        data = self._read_now(event_key, lo, hi)
        if data is not None:
            # A read in this thread (a local folder) costs less than handing one to the loop:
            # nothing is fetched ahead.
            self._hold(event_key, lo, data)
            return data, start - lo
        data = self.loop.run(self._fetch(event_key, lo, hi))  # not (completely) there yet
        if data is None or len(data) < end - lo:
            raise self._unreadable(event_key, lo, end, data, what)
        self._hold(event_key, lo, data)
        # Fetched ahead without this record (its predicted records only): read now, so it no
        # longer counts as waiting for its first use.
        self.prefetch.fetched.discard(event_key)
        self.prefetch.after(event_key)
        return data, start - lo

    def _check_length(self, event_key: str, start: int, length: int) -> None:
        """Before a large read: the record's own length field (12 bytes read first) must say
        the size the index file gives it, so a hostile index (an 8 GiB length in a sparse event
        file) is a ``CorruptRecordError`` naming the file and offset, not gigabytes read."""
        try:
            head = self.loop.run(self._storage.read_range(event_key, start, start + HEADER_SIZE))
        except ObjectNotFound:
            return  # the read that follows tells the missing file
        if len(head) < HEADER_SIZE:
            return  # a short file: the read that follows tells it
        n, crc = HEADER.unpack_from(head)
        if crc != length_crc(n) or n + RECORD_OVERHEAD != length:
            says = f"{n + RECORD_OVERHEAD} bytes" if crc == length_crc(n) else "a corrupt length"
            reason = f"the index file says its record is {length} bytes; its header says {says}"
            raise CorruptRecordError(f"{self._root}/{event_key}", start, reason)

    def _hold(self, event_key: str, lo: int, data: bytes) -> None:
        """Keep the file just read at hand for the next reads, if the byte cache keeps it too
        (with no byte cache, nothing is held)."""
        if len(data) + 33 <= self._raw.max_bytes:
            self.recent = (event_key, lo, data)

    def forget(self) -> None:
        """Let go of the file held at hand and of what was read ahead (the trial is closing)."""
        self.recent = _NOTHING
        if self.ahead is not None:
            self.ahead.close()

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

    def _cached_span(self, event_key: str, start: int, end: int) -> Record | None:
        span = self._raw.get(event_key)
        if span is not None and span[0] <= start and end <= span[0] + len(span[1]):
            return span[1], start - span[0]
        return None

    def _span_to_read(
        self, event_key: str, start: int, end: int, span: tuple[int, int] | None = None
    ) -> tuple[int, int]:
        """``span`` (by default the span of every record of the file) when it holds
        ``[start, end)`` and is not too big for one read, else the record alone."""
        if span is None:
            with self.cache.lock:
                state = cast(IndexedState, self.cache.state)  # SmdebugSource.make_state's
                span = state.event_spans.get(event_key, (start, end))
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
        self._raw.put(event_key, (lo, data))
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
            self._raw.put(event_key, (lo, data))
        return data

    def _trial_complete(self) -> bool:
        return self.cache.state.loaded_all_steps
