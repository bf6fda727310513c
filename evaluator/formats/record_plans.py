"""Whole event files decoded in one check: the plans of ``RecordLayouts.fast_many``.

The event files of a job repeat one another: the same records at the same offsets, step after
step. ``fast_many`` decodes a file's records in one Python loop, and remembers which bytes that
loop looked at and what it found there (a ``_FilePlan``). The next file with the same records
at the same offsets is checked against those bytes in one numpy gather and compare; when they
are all the same, the loop would take the same path through the same bytes, so its views are
made without it. Any difference runs the loop. ``FilePlans`` keeps the places and plans of one
``RecordLayouts``, within a bound on their memory.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = ["MIN_PLANNED", "FilePlans", "RecordLayout"]


class RecordLayout(NamedTuple):
    """A learned layout of one tensor's records (see ``record_values``)."""

    middle: bytes  # from the summary field's tag to the first value byte
    skip: int  # len(middle)
    dtype: np.dtype[Any]
    size: int  # elements
    shape: tuple[int, ...] | None  # None: 1-D
    nbytes: int


_WALL_TIME = 0x09  # Event.wall_time, fixed64
_STEP = 0x10  # Event.step, varint


class _Place:
    """Files of one list of keys whose records sat at one place (``_place_key``: where the
    bytes held begin, the records' starts and lengths) and were read at the positions
    ``wanted``. The second file decoded at a place gets a ``plan`` for the files after it."""

    __slots__ = ("wanted", "plan", "misses")

    def __init__(self, wanted: list[int]) -> None:
        self.wanted = list(wanted)
        self.plan: _FilePlan | None = None
        self.misses = 0  # files here the plan did not fit


class _Places:
    """The places of the files of one list of keys (held: found by its identity), by
    ``_place_key``; a TRAIN and an EVAL step's records differ in length, and a tensor whose
    size changes moves the records after it, so a list of keys can have many."""

    __slots__ = ("keys", "by_key")

    def __init__(self, keys: Sequence[Hashable]) -> None:
        self.keys = keys
        self.by_key: dict[object, _Place] = {}


def _place_key(lo: int, starts: Sequence[int], lengths: Sequence[int]) -> object:
    if isinstance(starts, array) and isinstance(lengths, array):
        return lo, starts.tobytes(), lengths.tobytes()
    return lo, tuple(starts), tuple(lengths)


class _FilePlan:
    """What ``fast_many``'s loop checked in one event file's records, to check another file
    with the same records at the same place in one step: the bytes at ``_at``, masked with
    ``_mask``, must be ``_expected``; then the values are where they were.

    ``_views``: (position in the file's list, base, first and end element, shape) of each
    record, its values a slice of one of ``_bases``: an array of a dtype over the whole buffer
    from an offset below its item size (one per dtype and alignment the records have), made
    once per file; slicing it costs a third of a ``frombuffer`` per record. ``_rows``: when
    the records are one dtype and shape (not scalars) and evenly spaced, one array over the
    buffer whose rows are the values (``_even_rows``)."""

    __slots__ = ("size", "_at", "_mask", "_expected", "_min_size", "_bases", "_views", "_rows")

    def __init__(
        self,
        checks: _Checks,
        min_size: int,
        views: list[tuple[int, np.dtype[Any], int, int, tuple[int, ...] | None]],
    ) -> None:
        self.size = len(checks.at)  # bytes checked
        self._at = np.array(checks.at, np.intp)
        self._mask = np.frombuffer(bytes(checks.mask), np.uint8)
        self._expected = bytes(checks.expected)
        self._min_size = min_size
        self._rows = _even_rows(views)
        bases: dict[tuple[np.dtype[Any], int], int] = {}
        self._views: list[tuple[int, int, int, int, tuple[int, ...] | None]] = []
        for i, dtype, size, content, dims in views:
            itemsize = dtype.itemsize
            base = bases.setdefault((dtype, content % itemsize), len(bases))
            first = content // itemsize
            self._views.append((i, base, first, first + size, dims))
        self._bases = list(bases)

    def fill(self, buf: bytes | bytearray, out: list[np.ndarray | None]) -> bool:
        """Set ``out`` from ``buf`` when its checked bytes are the plan's; False if not."""
        if len(buf) < self._min_size:
            return False
        found = np.frombuffer(buf, np.uint8)[self._at]
        found &= self._mask
        if found.tobytes() != self._expected:
            return False
        if self._rows is not None:  # one array over the file, its rows the values
            shape, dtype, first, strides, at = self._rows
            for i, row in zip(at, np.ndarray(shape, dtype, buf, first, strides), strict=True):
                out[i] = row
            return True
        # The buffer holds every record (``_min_size``), so each base reaches its last value.
        n = len(buf)
        bases = [np.frombuffer(buf, d, (n - at) // d.itemsize, at) for d, at in self._bases]
        for i, base, first, end, dims in self._views:
            flat = bases[base][first:end]
            out[i] = flat if dims is None else flat.reshape(dims)
        return True


def _even_rows(
    views: list[tuple[int, np.dtype[Any], int, int, tuple[int, ...] | None]],
) -> tuple[tuple[int, ...], np.dtype[Any], int, tuple[int, ...], list[int]] | None:
    """When ``views`` are of one dtype and shape, evenly spaced in the file without overlap:
    the shape, dtype, offset and strides of one array whose rows they are (in file order,
    which need not be the index's), and their positions in that order."""
    views = sorted(views, key=lambda v: v[3])
    _, dtype, size, first, shape = views[0]
    spacing = views[1][3] - first if len(views) > 1 else 0
    if shape == () or (len(views) > 1 and spacing < size * dtype.itemsize):
        return None  # a row of scalars would be a numpy scalar, not a 0-d array
    for k, (_, d, n, content, s) in enumerate(views):
        if d != dtype or n != size or s != shape or content != first + k * spacing:
            return None
    dims = (size,) if shape is None else shape
    strides = (spacing, *_c_strides(dims, dtype.itemsize))
    return (len(views), *dims), dtype, first, strides, [v[0] for v in views]


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class _Checks:
    """Bytes to check, built up: positions, masks, expected (masked) values."""

    __slots__ = ("at", "mask", "expected")

    def __init__(self) -> None:
        self.at = array("q")
        self.mask = bytearray()
        self.expected = bytearray()

    def same(self, buf: bytes | bytearray, pos: int, n: int) -> None:
        """``buf[pos:pos + n]`` must stay as it is."""
        self.at.extend(range(pos, pos + n))
        self.mask += b"\xff" * n
        self.expected += buf[pos : pos + n]

    def high_bit(self, pos: int, value: int) -> None:
        self.at.append(pos)
        self.mask.append(0x80)
        self.expected.append(value)


def _trace(
    buf: bytes | bytearray, start: int, length: int, layout: RecordLayout, into: _Checks
) -> int:
    """Add to ``into`` the bytes ``fast_many``'s loop reads in the record at ``start`` (which
    it has just decoded with ``layout``): the framing, the field tags it branches on, the high
    bits of the step's varint, the learned bytes and what follows the values. Equal bytes there
    send the loop the same way to the same values. Returns the offset of the values."""
    end = start + length - 4
    into.same(buf, start, 12)
    into.same(buf, end, 4)
    pos = start + 12
    into.same(buf, pos, 1)
    if buf[pos] == _WALL_TIME:
        pos += 9
        into.same(buf, pos, 1)
    if buf[pos] == _STEP:
        pos += 1
        while buf[pos] >= 0x80:
            into.high_bit(pos, 0x80)
            pos += 1
        into.high_bit(pos, 0x00)
        pos += 1
    into.same(buf, pos, layout.skip)
    content = pos + layout.skip
    tensor_end = content + layout.nbytes
    if tensor_end != end:
        into.same(buf, tensor_end, 2)
    return content


MIN_PLANNED = 4  # records in a file: fewer are decoded by the loop alone
_MAX_PLANNED_KEYS = 16  # lists of keys (index layouts) with places kept
_MAX_PLACES = 64  # per list of keys
_MAX_MISSES = 2  # files at a place its plan did not fit: then no more plans there
_MAX_PLANNED_CHECKS = 1 << 21  # bytes checked by all plans together (about 20 MiB of plans)


def _plan(
    buf: bytes | bytearray,
    lo: int,
    starts: Sequence[int],
    lengths: Sequence[int],
    planned: list[tuple[int, RecordLayout]],
) -> _FilePlan:
    """What the loop checked in this file, every one of whose records it has just decoded
    (``planned``: position and layout), for the next file at the same place."""
    checks = _Checks()
    views = []
    min_size = 0
    for i, layout in planned:
        start = starts[i] - lo
        content = _trace(buf, start, lengths[i], layout, checks)
        views.append((i, layout.dtype, layout.size, content, layout.shape))
        min_size = max(min_size, start + lengths[i])
    return _FilePlan(checks, min_size, views)


class FilePlans:
    """The places files of one list of keys came at, and their plans (see ``_FilePlan``)."""

    def __init__(self) -> None:
        self.places: dict[int, _Places] = {}  # by the identity of the files' keys
        self.planned_checks = 0  # bytes checked by all plans kept

    def fill(
        self,
        buf: bytes | bytearray,
        lo: int,
        keys: Sequence[Hashable],
        starts: Sequence[int],
        lengths: Sequence[int],
        positions: Iterable[int],
        out: list[np.ndarray | None],
    ) -> tuple[bool, _Place | None]:
        """(True, place) when the plan of the file's place set ``out``; else (False, the
        place if there is one), and the loop decodes the file."""
        places = self.places.get(id(keys))
        if places is None or places.keys is not keys:
            return False, None
        place = places.by_key.get(_place_key(lo, starts, lengths))
        if place is not None and place.wanted == positions and place.plan is not None:
            if place.plan.fill(buf, out):
                return True, place
            place.misses += 1
        return False, place

    def decoded(
        self,
        place: _Place | None,
        buf: bytes | bytearray,
        lo: int,
        keys: Sequence[Hashable],
        starts: Sequence[int],
        lengths: Sequence[int],
        wanted: list[int],
        planned: list[tuple[int, RecordLayout]],
    ) -> None:
        """The loop decoded every record ``wanted`` of a file (``planned``): note its place,
        or give the place it was seen at before a plan."""
        if place is None or place.wanted != wanted:
            self._note_place(keys, lo, starts, lengths, wanted)
        elif place.misses < _MAX_MISSES:
            self._set_plan(place, _plan(buf, lo, starts, lengths, planned))

    def _set_plan(self, place: _Place, plan: _FilePlan) -> None:
        """Give ``place`` its plan, within one bound on the bytes all plans check (each costs
        about 10 bytes of memory): past it, every place and plan is dropped and learned anew,
        this one's too."""
        if place.plan is not None:
            self.planned_checks -= place.plan.size
        if self.planned_checks + plan.size > _MAX_PLANNED_CHECKS:
            self.places.clear()  # this place too: the next files are noted again
            self.planned_checks = 0
            return
        place.plan = plan
        self.planned_checks += plan.size

    def _note_place(
        self,
        keys: Sequence[Hashable],
        lo: int,
        starts: Sequence[int],
        lengths: Sequence[int],
        wanted: list[int],
    ) -> None:
        """A file decoded at a new place: the next one there gets a plan (a place seen once
        costs no plan)."""
        places = self.places.get(id(keys))
        if places is None or places.keys is not keys:
            if places is not None:
                self._drop(places.by_key.values())
            if len(self.places) >= _MAX_PLANNED_KEYS:
                self.places.clear()
                self.planned_checks = 0
            places = self.places[id(keys)] = _Places(keys)
        key = _place_key(lo, starts, lengths)
        if len(places.by_key) >= _MAX_PLACES:
            self._drop(places.by_key.values())
            places.by_key.clear()
        elif key in places.by_key:
            self._drop((places.by_key[key],))
        places.by_key[key] = _Place(wanted)

    def _drop(self, places: Iterable[_Place]) -> None:
        """Count the plans of ``places`` out (they are being let go)."""
        # A list first: another thread's reader may add a place meanwhile (a count off by a
        # plan only moves the next clearing).
        self.planned_checks -= sum(p.plan.size for p in list(places) if p.plan is not None)
