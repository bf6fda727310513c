"""Reading tensor values: the one door from an index entry to an array.

``ValueReader`` turns an index entry (event file, byte range) into an array. The bytes come
from ``EventBytes`` (held_files.py: the file at hand, the byte cache, coalesced and waited-for
reads), which fetches ahead through ``Prefetcher`` (prefetch.py) while a rule walks the steps.

The hot path (``read_in``, which ``Tensor.value`` and the batch read call): the records a rule
read in the previous file of the same index layout are decoded from the file at hand in one
loop as soon as it is read (``RecordLayouts.fast_many``), into the reader's private
``_DecodedFile``: a rule reads the same tensors at every step, so a value is then a lookup and
a copy. The file decoded before it is kept too (``_previous``): a rule that reads the step
before as well (an update ratio) finds both, instead of decoding each file again at every
switch. Records that loop cannot read go the checked way, one by one.

Values are private: every array handed out with ``copy=True`` (what the Tensor API does) is a
new, writable array; ``copy=False`` gives a read-only view of the event file's bytes, for a
caller that reduces or stacks it without keeping it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from evaluator.engine.cache import TrialCache
from evaluator.engine.reads import observing
from evaluator.engine.reductions import compute_reduction
from evaluator.engine.runner import BackgroundLoop
from evaluator.formats.record_values import RecordLayouts
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.entries import FileIndex, Layout, Location
from evaluator.sources.smdebug.held_files import EventBytes, Held, Reading, Record
from evaluator.sources.smdebug.prefetch import Prefetcher
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.storage.base import Storage

__all__ = ["Reading", "ValueReader"]

_MAX_PREDICTED = 4096  # layouts whose reads are remembered


class _DecodedFile:
    """The index file read last, decoded: ``views`` are its records' values (read-only views
    of the event file's bytes, None where not decoded yet) by position in the file; which are
    decoded when the file is first read is predicted from ``read``, the positions read in the
    last file of the same layout (a rule reads the same tensors at every step). One object per
    file, replaced whole, so that a reader in another thread sees a file's views with its own
    ``read``."""

    __slots__ = ("starts", "views", "read", "file")

    def __init__(self, file: FileIndex | None, views: list[np.ndarray | None]) -> None:
        self.starts: object = None if file is None else file.starts
        self.views = views
        self.read: set[int] = set()
        self.file = file


_NONE_DECODED = _DecodedFile(None, [])


class ValueReader:
    """Values of one trial's tensors, from its storage through its cache."""

    def __init__(
        self,
        cache: TrialCache,
        source: SmdebugSource,
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
        root = uri.rstrip("/")
        self._values = cache.values  # the decoded-value cache, one attribute away
        self._layouts = RecordLayouts(source_prefix=f"{root}/")
        self._fast = self._layouts.fast
        self._prefetch = Prefetcher(cache, source, loop, self._wanted_span)
        self._bytes = EventBytes(cache, source, storage, loop, self._prefetch, root=root)
        self._decoded = _NONE_DECODED
        self._previous = _NONE_DECODED  # the file decoded before it, still at hand
        self._predicted: dict[Layout, list[int]] = {}

    def sole_reader(
        self,
        name: str,
        sole_file: dict[int, FileIndex],
        general: Callable[[str, int, ModeKeys, str | None], np.ndarray],
    ) -> Callable[..., np.ndarray]:
        """``value(step_num, mode=GLOBAL, worker=None)`` of ``name``, as ``Tensor.value``
        calls it: the hot path (a GLOBAL read without a worker at a step whose one index file
        is ``sole_file[step]``, the value in the file at hand) takes this one call, with
        ``read_in``'s first lines and ``note_read`` inlined; other reads of a sole file go
        to ``read_in``, and every other read to ``general(name, step, mode, worker)``."""
        read_in = self.read_in
        glob = ModeKeys.GLOBAL

        def value(step_num: int, mode: ModeKeys = glob, worker: str | None = None) -> np.ndarray:
            if mode is glob and worker is None:
                sole = sole_file.get(step_num)
                if sole is not None:
                    i = sole.layout.position.get(name)
                    if i is not None:
                        decoded = self._decoded
                        if decoded.starts is sole.starts and (view := decoded.views[i]) is not None:
                            decoded.read.add(i)
                            found = view.copy()
                        else:
                            found = read_in(sole, i, name, step_num, mode)
                        observer = observing()
                        if observer is not None:
                            observer(name, step_num, found)
                        return found
            return general(name, step_num, mode, worker)

        return value

    def read_in(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys, copy: bool = True
    ) -> np.ndarray:
        """The raw value at position ``i`` of index ``file`` (``name`` there, read for ``step``
        of ``mode``): the hot path of ``Tensor.value``. Reads in the file read last come from
        its decoded records; a copy, unless ``copy=False`` (a read-only view of the bytes, for
        a caller that reduces or stacks the arrays without keeping them)."""
        decoded = self._decoded
        if decoded.starts is not file.starts:
            decoded = self._previous  # a rule reading the step before too (an update ratio)
        if decoded.starts is file.starts:
            value = decoded.views[i]
            if value is not None:
                decoded.read.add(i)
                return value.copy() if copy else value
        return self._read_in(file, i, name, step, mode, copy)

    def _read_in(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys, copy: bool
    ) -> np.ndarray:
        # Rules in other threads may move the file at hand and ``_decoded`` on: each is read
        # once.
        event_key, start, length = file.event_key, file.starts[i], file.lengths[i]
        location = (event_key, start, length)
        recent = self._bytes.recent
        if recent[0] != event_key:
            # The file's first read: its bytes (the records the rule is expected to read of
            # it, and this one) are fetched, or found in the byte cache, and held; they are
            # then decoded below as the reads after it are.
            self._fold_log()
            if not self.cache.raw.max_bytes:  # no byte cache: the general path and value cache
                return self.read_value(
                    location, (name, step, mode), span=self._wanted_span(file, i)
                )
            what = (name, step, mode)
            held, record = self._bytes.hold_file(location, what, self._wanted_span(file, i))
            if held is None:  # not kept (a file larger than the byte cache): this record alone
                assert record is not None
                return self._decode_record(location, record, what, None, copy)
            recent = held
        decoded = self._decoded
        if decoded.starts is not file.starts:
            decoded = self._begin(file, recent)
            predicted = decoded.views[i]
            if predicted is not None:
                decoded.read.add(i)
                return predicted.copy() if copy else predicted
        at = start - recent[1]
        data = recent[2]
        if at >= 0 and at + length <= len(data):
            view = self._fast(data, at, length, name, False)
            if view is not None:
                decoded.views[i] = view
                decoded.read.add(i)
                return view.copy() if copy else view
        # Not at hand, or a record the learned layouts cannot read yet: the general path.
        value = self.read_value(location, (name, step, mode))
        decoded.read.add(i)
        return value

    def _decode_record(
        self,
        location: tuple[str, int, int],
        record: Record,
        what: Reading,
        layout: Hashable,
        copy: bool,
    ) -> np.ndarray:
        """One record's value from its bytes (no file at hand): a new array, or with
        ``copy=False`` a read-only view of the bytes."""
        data, at = record
        length = location[2]
        value = self._fast(data, at, length, what[0] if layout is None else layout, copy)
        if value is None:
            value = self._decode_checked(location, memoryview(data)[at : at + length], what, layout)
        return value

    def _begin(self, file: FileIndex, recent: Held) -> _DecodedFile:
        """Start decoding the records of ``file`` from ``recent``, its event file's bytes: the
        positions read in the last file of its layout are decoded at once."""
        self._fold_log()
        views: list[np.ndarray | None] = [None] * len(file.starts)
        wanted = self._predicted.get(file.layout)
        if wanted:
            self._layouts.fast_many(
                recent[2], recent[1], file.layout.names, file.starts, file.lengths, wanted, views
            )
        self._previous = self._decoded
        decoded = self._decoded = _DecodedFile(file, views)
        return decoded

    def _fold_log(self) -> None:
        """The reads in the file decoded last become the prediction for its layout."""
        decoded = self._decoded
        previous, log = decoded.file, decoded.read
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
        return self._read_value(location, what, layout, span, True)

    def value_to_reduce(self, location: tuple[str, int, int], what: Reading) -> np.ndarray:
        """``read_value`` for a caller that only reduces the value and keeps nothing of it (a
        computed reduction): a read-only view of the event file's bytes, no copy."""
        if type(self).read_value is not ValueReader.read_value:  # a reader of other values
            return self.read_value(location, what)
        return self._read_value(location, what, None, None, False)

    def _read_value(
        self,
        location: tuple[str, int, int],
        what: Reading,
        layout: Hashable,
        span: tuple[int, int] | None,
        copy: bool,
    ) -> np.ndarray:
        event_key, start, length = location
        held = self._bytes.cached(event_key)  # the file at hand, else one byte-cache lookup
        if held is None:
            return self._read_uncached(location, what, layout, span, copy)
        at = start - held[1]
        data = held[2]
        if at < 0 or at + length > len(data):
            return self._read_uncached(location, what, layout, span, copy)
        self._prefetch.first_use(event_key)
        value = self._fast(data, at, length, what[0] if layout is None else layout, copy)
        if value is not None:
            return value
        return self._decode_checked(location, memoryview(data)[at : at + length], what, layout)

    def _read_uncached(
        self,
        location: tuple[str, int, int],
        what: Reading,
        layout: Hashable,
        span: tuple[int, int] | None = None,
        copy: bool = True,
    ) -> np.ndarray:
        """A record whose bytes are not in the byte cache: from the value cache if it kept the
        value, else from storage (see ``EventBytes.record``); with ``copy=False`` a view of
        the bytes read, kept nowhere."""
        event_key, start, length = location
        values = self._values
        if values.max_bytes:
            cached = values.get((event_key, start))
            if cached is not None:
                return cached.copy() if copy else cached
        data, at = record = self._bytes.record(location, what, span)
        if not copy:
            return self._decode_record(location, record, what, layout, False)
        value = self._fast(data, at, length, what[0] if layout is None else layout)
        if value is None:
            return self._decode_checked(location, memoryview(data)[at : at + length], what, layout)
        key = (event_key, start)
        if values.max_bytes and self._worth_keeping(length) and values.admit(key):
            values.put(key, value)
            return value.copy()
        return value

    def _worth_keeping(self, length: int) -> bool:
        """Whether a decoded record of ``length`` bytes is worth a place in the value cache
        (not a local folder's large record: its bytes cost no more to read again)."""
        below = self._bytes.keep_decoded_below
        return below is None or length < below

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
        if values.max_bytes and self._worth_keeping(location[2]) and values.admit(key):
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

    def forget(self) -> None:
        """Let go of the file held at hand (the trial is closing)."""
        self._bytes.forget()
        self._decoded = self._previous = _NONE_DECODED
