"""The fast path of reading a value: a tensor record decoded by a learned byte layout.

A trial's records of one tensor differ only in a few places from step to step: the wall time,
the step number, the total lengths and the mode step in the plugin data. Everything between the
summary value's header and the first value byte (tag, dtype, shape with its dim names, the
length of ``tensor_content``) is the same bytes every time. ``RecordLayouts`` learns those
bytes once per tensor from a record the full protobuf decode has read, and then reads a record
by checking its framing, walking the few fields that change, comparing the learned bytes in
one slice, and taking the values with one ``numpy.frombuffer``: no protobuf message is built.

Any record that does not match exactly (another writer's field order, a changed shape, a
string tensor, a payload CRC in the footer, a damaged record) goes the checked way
(``decode_record_value``), which also learns the new layout.

The event files of a job repeat one another: the same records at the same offsets, step after
step. ``fast_many`` decodes a file's records in one Python loop, and remembers which bytes that
loop looked at and what it found there (a ``_FilePlan``). The next file with the same records
at the same offsets is checked against those bytes in one numpy gather and compare; when they
are all the same, the loop would take the same path through the same bytes, so its views are
made without it. Any difference runs the loop.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from evaluator.formats.crc import FOOTER_MAGIC
from evaluator.formats.events import decode_record_value
from evaluator.formats.tensor_codec import content_dtype
from evaluator.formats.tfrecord import RECORD_OVERHEAD, Buffer, length_crc

__all__ = ["RecordLayouts"]

_pack_header = struct.Struct("<QI").pack
_HEADERS: dict[int, bytes] = {}  # record length -> its header bytes
_FIRST = (0,)
_MAX_LAYOUTS = 65536  # tensors of one trial; more are read the checked way
_MAX_VARIANTS = 64  # layouts of one tensor (metadata lengths: modes, mode-step digits; sizes)
_MAX_ALL_VARIANTS = 262144  # layouts of all tensors: a bound on their memory (~50 MiB)

# Protobuf tags (field number << 3 | wire type) of the fields on the way to tensor_content.
_WALL_TIME = 0x09  # Event.wall_time, fixed64
_STEP = 0x10  # Event.step, varint
_SUMMARY = 0x2A  # Event.summary
_VALUE = 0x0A  # Summary.value (and Summary.Value.tag)
_TENSOR = 0x42  # Summary.Value.tensor
_DTYPE = 0x08  # TensorProto.dtype (and Dim.size)
_SHAPE = 0x12  # TensorProto.tensor_shape (and TensorShapeProto.dim, Dim.name)
_CONTENT = 0x22  # TensorProto.tensor_content
_METADATA = 0x4A  # Summary.Value.metadata


class _Layout(NamedTuple):
    middle: bytes  # from the summary field's tag to the first value byte
    skip: int  # len(middle)
    dtype: np.dtype[Any]
    size: int  # elements
    shape: tuple[int, ...] | None  # None: 1-D
    nbytes: int


def _varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it); IndexError past the end or beyond ten bytes."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint longer than ten bytes")


def _after_step(buf: Buffer, pos: int) -> int:
    """Where the Event at ``pos`` goes on after its wall time and step (both optional)."""
    if buf[pos] == _WALL_TIME:
        pos += 9
    if buf[pos] == _STEP:
        pos += 1
        while buf[pos] >= 0x80:
            pos += 1
        pos += 1
    return pos


def _summary_value_start(buf: Buffer, pos: int, end: int) -> int:
    """Where the one summary value's fields start, for the summary field at ``pos`` holding
    exactly one value and ending the Event at ``end``; -1 otherwise. IndexError when the bytes
    end early."""
    if buf[pos] != _SUMMARY:
        return -1
    n, pos = _varint(buf, pos + 1)
    if pos + n != end or buf[pos] != _VALUE:
        return -1
    n, pos = _varint(buf, pos + 1)
    return pos if pos + n == end else -1


def _after_metadata(buf: Buffer, pos: int) -> int:
    """The position after the metadata field at ``pos``, or -1 if there is none."""
    if buf[pos] != _METADATA:
        return -1
    n = buf[pos + 1]
    if n < 0x80:
        return pos + 2 + n
    n, pos = _varint(buf, pos + 1)
    return pos + n


def _learn(buf: Buffer, pos: int, end: int) -> tuple[int, int, list[int], int] | None:
    """Walk one summary value from ``pos`` (see ``_summary_value_start``) field by field:
    (content start, dtype enum, dims, content length) when it is a tag, a tensor of dtype,
    shape and ``tensor_content`` only, and the metadata; None for anything else."""
    if buf[pos] == _VALUE:  # tag
        n, pos = _varint(buf, pos + 1)
        pos += n
    if buf[pos] != _TENSOR:
        return None
    n, pos = _varint(buf, pos + 1)
    tensor_end = pos + n
    dtype = 0
    if buf[pos] == _DTYPE:
        dtype, pos = _varint(buf, pos + 1)
    dims: list[int] = []
    if buf[pos] == _SHAPE:
        n, pos = _varint(buf, pos + 1)
        shape_end = pos + n
        while pos < shape_end:
            if buf[pos] != _SHAPE:  # only dims; unknown_rank or anything else: not learned
                return None
            n, pos = _varint(buf, pos + 1)
            dim_end = pos + n
            size = 0
            if pos < dim_end and buf[pos] == _DTYPE:
                size, pos = _varint(buf, pos + 1)
            if pos < dim_end and buf[pos] == _SHAPE:  # the dim's name
                n, pos = _varint(buf, pos + 1)
                pos += n
            if pos != dim_end:
                return None
            dims.append(size)
        if pos != shape_end:
            return None
    if buf[pos] != _CONTENT:
        return None
    n, pos = _varint(buf, pos + 1)
    if pos + n != tensor_end:
        return None
    after = tensor_end if tensor_end == end else _after_metadata(buf, tensor_end)
    if after != end:
        return None
    return pos, dtype, dims, n


def _header(length: int) -> bytes:
    """The header of a framed record of ``length`` bytes (remembered for a few lengths)."""
    n = max(0, length - RECORD_OVERHEAD)
    header = _pack_header(n, length_crc(n))
    if len(_HEADERS) < 4096:
        _HEADERS[length] = header
    return header


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


def _trace(buf: bytes | bytearray, start: int, length: int, layout: _Layout, into: _Checks) -> int:
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


_MIN_PLANNED = 4  # records in a file: fewer are decoded by the loop alone
_MAX_PLANNED_KEYS = 16  # lists of keys (index layouts) with places kept
_MAX_PLACES = 64  # per list of keys
_MAX_MISSES = 2  # files at a place its plan did not fit: then no more plans there
_MAX_PLANNED_CHECKS = 1 << 21  # bytes checked by all plans together (about 20 MiB of plans)


def _plan(
    buf: bytes | bytearray,
    lo: int,
    starts: Sequence[int],
    lengths: Sequence[int],
    planned: list[tuple[int, _Layout]],
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


class RecordLayouts:
    """Learned byte layouts of the tensors of one trial, keyed by what the caller reads (a
    tensor name, or a name and a reduction), and the decode that uses them. A key has one
    layout per extent (bytes from the summary to the end): the summary's lengths, among the
    learned bytes, grow with the metadata, so a tensor saved at TRAIN and at EVAL steps has
    a layout for each mode, and both stay learned."""

    def __init__(self, *, source_prefix: str = "") -> None:
        self._layouts: dict[Hashable, dict[int, _Layout]] = {}
        self._source_prefix = source_prefix  # + the event key: the file errors name
        self._places: dict[int, _Places] = {}  # by the identity of the files' keys
        self._variants = 0  # layouts of all keys
        self._planned_checks = 0  # bytes checked by all plans kept

    def __len__(self) -> int:
        return len(self._layouts)

    def fast(
        self, buf: Buffer, start: int, length: int, key: Hashable, copy: bool = True
    ) -> np.ndarray | None:
        """The array of the framed record at ``buf[start:start + length]`` (a new, writable
        array; with ``copy=False`` a read-only view of ``buf``, for a caller that copies it
        anyway) when it has the layout learned for ``key``; None when it has not (or none was
        learned yet): then ``decode`` it."""
        if key not in self._layouts:
            return None
        if type(buf) is memoryview:  # bytes and bytearray have startswith; views do not
            buf = bytes(buf)
        out: list[np.ndarray | None] = [None]
        self.fast_many(buf, 0, (key,), (start,), (length,), _FIRST, out)
        flat = out[0]
        if flat is None or not copy:
            return flat
        return flat.copy()

    def fast_many(
        self,
        buf: bytes | bytearray,
        lo: int,
        keys: Sequence[Hashable],
        starts: Sequence[int],
        lengths: Sequence[int],
        positions: Iterable[int],
        out: list[np.ndarray | None],
    ) -> None:
        """``out[i]`` = the values of record ``i`` (``keys[i]`` at file offset ``starts[i]``,
        ``lengths[i]`` bytes; ``buf`` holds the file from offset ``lo``) as a read-only view
        of ``buf``, for each of ``positions`` whose record has the layout learned for its key;
        the others are left as they are (``decode`` reads them and says what is wrong). One
        loop for the records of an event file that a reader knows it will want (or one
        check of the bytes that loop read in a file like it: see ``_FilePlan``)."""
        places = self._places.get(id(keys))
        place = None
        if places is not None and places.keys is keys:
            place = places.by_key.get(_place_key(lo, starts, lengths))
            if place is not None and place.wanted == positions and place.plan is not None:
                if place.plan.fill(buf, out):
                    return
                place.misses += 1
        # A file of several records is planned when the loop decodes every one asked.
        wanted = positions if isinstance(positions, list) else None
        planned: list[tuple[int, _Layout]] | None = (
            [] if wanted is not None and len(wanted) >= _MIN_PLANNED else None
        )
        layouts = self._layouts
        startswith = buf.startswith
        frombuffer = np.frombuffer
        for i in positions:
            variants = layouts.get(keys[i])
            if variants is None:
                continue
            start = starts[i] - lo
            if start < 0:  # before the bytes held (a negative start would count from the end)
                continue
            length = lengths[i]
            # The 12 header bytes (payload length, its masked CRC) follow from the length.
            header = _HEADERS.get(length) or _header(length)
            end = start + length - 4
            if not (startswith(header, start) and startswith(FOOTER_MAGIC, end)):
                continue
            pos = start + 12
            try:
                if buf[pos] == 0x09:  # wall time
                    pos += 9
                if buf[pos] == 0x10:  # step
                    pos += 1
                    while buf[pos] >= 0x80:
                        pos += 1
                    pos += 1
                # The summary and its one value end where the payload ends, and the bytes up
                # to the values are the learned ones: tag, dtype, shape, content length.
                layout = variants.get(end - pos)
                if layout is None:
                    continue
                middle, skip, dtype, size, shape, nbytes = layout
                if not startswith(middle, pos):
                    continue
                content = pos + skip
                tensor_end = content + nbytes
                # After the values: nothing, or the metadata field up to the end (so no
                # second tensor field follows, which protobuf would merge into the first).
                if tensor_end != end and (
                    buf[tensor_end] != 0x4A or buf[tensor_end + 1] + tensor_end + 2 != end
                ):
                    continue
            except IndexError:  # the bytes end inside a field: the checked path says why
                continue
            flat = frombuffer(buf, dtype, size, content)
            out[i] = flat if shape is None else flat.reshape(shape)
            if planned is not None:
                planned.append((i, layout))
        if wanted is not None and planned is not None and len(planned) == len(wanted):
            if place is None or place.wanted != wanted:
                self._note_place(keys, lo, starts, lengths, wanted)
            elif place.misses < _MAX_MISSES:
                self._set_plan(place, _plan(buf, lo, starts, lengths, planned))

    def _set_plan(self, place: _Place, plan: _FilePlan) -> None:
        """Give ``place`` its plan, within one bound on the bytes all plans check (each costs
        about 10 bytes of memory): past it, every place and plan is dropped and learned anew,
        this one's too."""
        if place.plan is not None:
            self._planned_checks -= place.plan.size
        if self._planned_checks + plan.size > _MAX_PLANNED_CHECKS:
            self._places.clear()  # this place too: the next files are noted again
            self._planned_checks = 0
            return
        place.plan = plan
        self._planned_checks += plan.size

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
        places = self._places.get(id(keys))
        if places is None or places.keys is not keys:
            if places is not None:
                self._drop(places.by_key.values())
            if len(self._places) >= _MAX_PLANNED_KEYS:
                self._places.clear()
                self._planned_checks = 0
            places = self._places[id(keys)] = _Places(keys)
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
        self._planned_checks -= sum(p.plan.size for p in list(places) if p.plan is not None)

    def decode(self, record: Buffer, key: Hashable, *, event_key: str, offset: int) -> np.ndarray:
        """The array of one whole framed record, read the checked way
        (``decode_record_value``: its errors name the event file and ``offset``); its layout
        is learned for ``key`` when the fast path can read it."""
        source = f"{self._source_prefix}{event_key}"
        value = decode_record_value(record, source=source, offset=offset)
        self._learn_from(record, 0, len(record), key, value)
        return value

    def _learn_from(
        self, buf: Buffer, start: int, length: int, key: Hashable, value: np.ndarray
    ) -> None:
        """Remember the layout of a record the checked path has just read, when it is one the
        fast path can read and gives exactly ``value`` for."""
        if key not in self._layouts and len(self._layouts) >= _MAX_LAYOUTS:
            return
        end = start + length - 4
        try:
            summary = _after_step(buf, start + 12)
            pos = _summary_value_start(buf, summary, end)
            learned = _learn(buf, pos, end) if pos >= 0 else None
        except IndexError:
            learned = None
        if learned is None:
            self._forget(key)
            return
        content, enum, dims, nbytes = learned
        dtype = content_dtype(enum)
        if dtype is None or nbytes == 0 or value.dtype != dtype or value.nbytes != nbytes:
            self._forget(key)
            return
        if tuple(dims) != value.shape:
            self._forget(key)
            return
        if bytes(buf[content : content + nbytes]) != value.tobytes():
            self._forget(key)
            return
        shape = None if len(dims) == 1 else value.shape
        middle = bytes(buf[summary:content])
        variants = self._layouts.setdefault(key, {})  # keyed by the extent, summary to end
        extent = end - summary
        if extent not in variants:
            if len(variants) >= _MAX_VARIANTS or self._variants >= _MAX_ALL_VARIANTS:
                return
            self._variants += 1
        variants[extent] = _Layout(middle, len(middle), dtype, value.size, shape, nbytes)

    def _forget(self, key: Hashable) -> None:
        gone = self._layouts.pop(key, None)
        if gone:
            self._variants -= len(gone)
