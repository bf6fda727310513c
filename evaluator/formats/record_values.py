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

Whole files of such records are decoded in one loop, or in one check of the bytes that loop
read in a file like it (``record_plans``).
"""

from __future__ import annotations

import struct
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from evaluator.formats.crc import FOOTER_MAGIC
from evaluator.formats.events import decode_record_value
from evaluator.formats.record_plans import MIN_PLANNED, FilePlans, RecordLayout
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


class RecordLayouts:
    """Learned byte layouts of the tensors of one trial, keyed by what the caller reads (a
    tensor name, or a name and a reduction), and the decode that uses them. A key has one
    layout per extent (bytes from the summary to the end): the summary's lengths, among the
    learned bytes, grow with the metadata, so a tensor saved at TRAIN and at EVAL steps has
    a layout for each mode, and both stay learned."""

    def __init__(self, *, source_prefix: str = "") -> None:
        self._layouts: dict[Hashable, dict[int, RecordLayout]] = {}
        self._source_prefix = source_prefix  # + the event key: the file errors name
        self._plans = FilePlans()
        self._variants = 0  # layouts of all keys

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
        done, place = self._plans.fill(buf, lo, keys, starts, lengths, positions, out)
        if done:
            return
        # A file of several records is planned when the loop decodes every one asked.
        wanted = positions if isinstance(positions, list) else None
        planned: list[tuple[int, RecordLayout]] | None = (
            [] if wanted is not None and len(wanted) >= MIN_PLANNED else None
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
            self._plans.decoded(place, buf, lo, keys, starts, lengths, wanted, planned)

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
        variants[extent] = RecordLayout(middle, len(middle), dtype, value.size, shape, nbytes)

    def _forget(self, key: Hashable) -> None:
        gone = self._layouts.pop(key, None)
        if gone:
            self._variants -= len(gone)
