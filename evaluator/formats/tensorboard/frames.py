"""Many TensorBoard event-file records at once: framing, and one-scalar events decoded as columns.

``frame_records`` walks a buffer of TFRecord records (TensorBoard's framing: length, its CRC,
payload, the payload's CRC) in one tight loop and gives where each payload is, checking both
CRCs; it stops before a record cut short (a writer is appending: come back later) or a corrupt
one. ``simple_scalars`` then reads, with numpy over every record at once, the events that are
exactly one ``simple_value`` scalar (what torch and tensorboardX write for ``add_scalar``):
their step, tag and value. Any other record is left to the protobuf decoder
(``summary.parse_event``). Pure functions: bytes in, arrays out, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np

from evaluator.errors import CorruptRecordError, IncompleteRecord
from evaluator.formats.crc import FOOTER_MAGIC_VALUE, MASK_DELTA
from evaluator.formats.tfrecord import (
    HEADER,
    HEADER_SIZE,
    RECORD_OVERHEAD,
    length_crc,
    read_record,
)

__all__ = [
    "Frames",
    "Scalars",
    "claimed_size",
    "frame_records",
    "groups",
    "next_record",
    "simple_scalars",
]

_LENGTH = struct.Struct("<Q")
_MAX_STEP_BYTES = 5  # steps below 2**35 are read here; longer varints take the decoder's path


@dataclass(frozen=True, slots=True)
class Frames:
    """Payload ``starts`` and ``lengths`` (int64 arrays) of the whole records from the start
    of the buffer; ``end`` is where the next unread record begins. ``corrupt`` explains why
    reading stopped at ``end`` for good (None: the buffer ended, or a record is cut short)."""

    starts: np.ndarray
    lengths: np.ndarray
    end: int
    corrupt: str | None = None


def frame_records(
    blob: bytes, *, source: str, start: int = 0, limit: int | None = None, at: int = 0
) -> Frames:
    """Frame the records of ``blob`` from ``start`` on (at most ``limit`` of them), checking
    each length CRC and payload CRC (smdebug's constant footer is accepted too, as
    ``read_record`` does). The loop only follows the lengths and takes each payload's CRC;
    the checks run on every record at once after it. ``at``: where ``blob`` starts in
    ``source`` (``corrupt`` names the file's offset)."""
    starts: list[int] = []
    sums: list[int] = []
    add_start, add_sum = starts.append, sums.append
    unpack = _LENGTH.unpack_from
    crc32c = google_crc32c.value
    size = len(blob)
    pos = start
    limited = False
    try:
        for _ in range(size if limit is None else limit):
            first = pos + HEADER_SIZE
            end = first + unpack(blob, pos)[0]
            if end + 4 > size:
                break  # cut short, or a corrupt length: told apart below
            add_start(first)
            add_sum(crc32c(blob[first:end]))
            pos = end + 4
        else:
            limited = limit is not None
    except struct.error:
        pass  # fewer than 8 bytes left: a record cut short
    first_at = np.array(starts, np.int64)
    lengths = np.empty(len(first_at), np.int64)
    lengths[:-1] = np.diff(first_at) - RECORD_OVERHEAD
    if len(first_at):
        lengths[-1] = pos - 4 - first_at[-1]
    buf = np.frombuffer(blob, np.uint8)
    bad = _unchecked(buf, first_at, lengths, np.array(sums, np.uint64))
    if len(bad):  # keep the records before the first that fails; it is looked at below
        first_at, lengths = first_at[: bad[0]], lengths[: bad[0]]
        pos = int(starts[bad[0]]) - HEADER_SIZE
        limited = False
    corrupt = None
    if pos < size and not limited:
        try:  # the checked path says what is wrong, or that the record is not whole yet
            read_record(blob, pos, source=source)
        except IncompleteRecord:
            pass
        except CorruptRecordError as e:
            corrupt = str(CorruptRecordError(e.source, e.offset + at, e.reason))
        else:  # pragma: no cover - both paths check the same things
            raise AssertionError("a record the checked path accepts was refused")
    return Frames(first_at, lengths, pos, corrupt)


def claimed_size(blob: bytes, pos: int) -> int | None:
    """The whole size (16 + N) the record at ``pos`` claims, when its 12 header bytes are
    there and its length CRC is right; None otherwise."""
    if len(blob) - pos < HEADER_SIZE:
        return None
    n, crc = HEADER.unpack_from(blob, pos)
    return n + RECORD_OVERHEAD if crc == length_crc(n) else None


_SEARCH_BLOCK = 1 << 16  # candidate offsets looked at per vectorized pass


def next_record(blob: bytes, start: int, *, window: int) -> int | None:
    """The offset of the first whole, valid record (both CRCs right) of ``blob`` at or after
    ``start`` and before ``start + window``; None if there is none. Resynchronises a reader
    after a record whose length cannot be right. Offsets are sifted a block at a time: a
    length that fits in what is left of ``blob``, then its CRC; the few left are checked
    whole (``read_record``)."""
    buf = np.frombuffer(blob, np.uint8)
    size = len(blob)
    stop = min(size - RECORD_OVERHEAD + 1, start + window)
    for lo in range(start, stop, _SEARCH_BLOCK):
        at = np.arange(lo, min(stop, lo + _SEARCH_BLOCK), dtype=np.int64)
        at = at[buf[at + 7] == 0]  # lengths past 2**56 fit in no buffer
        lengths = _uint(buf, at, 8)
        fits = lengths.astype(np.float64) <= (size - at - RECORD_OVERHEAD)
        at, lengths = at[fits], lengths[fits]
        if not len(at):
            continue
        known, inverse = groups(lengths)
        table = np.array([length_crc(int(n)) for n in lengths[known].tolist()], np.uint64)
        at = at[_uint(buf, at + 8, 4) == table[inverse]]
        for pos in at.tolist():
            try:
                read_record(blob, pos)
            except (IncompleteRecord, CorruptRecordError):
                continue
            return int(pos)
    return None


def _uint(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned integers of ``width`` bytes at each of ``at``."""
    raw = np.ascontiguousarray(buf[at[:, None] + np.arange(width)])
    return raw.view("<u8" if width == 8 else "<u4").reshape(-1).astype(np.uint64)


def groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each distinct key's first row, group of each row): ``np.unique``'s
    ``return_index``/``return_inverse``, in order of first appearance, without sorting
    when there are few distinct keys (one vectorized pass per key)."""
    inverse = np.full(len(keys), -1, np.int64)
    firsts: list[int] = []
    left = np.arange(len(keys))
    while len(left) and len(firsts) < 16:
        row = int(left[0])
        same = keys[left] == keys[row]
        inverse[left[same]] = len(firsts)
        firsts.append(row)
        left = left[~same]
    if len(left):  # many distinct keys: sort the rest
        _, first, rest = np.unique(keys[left], return_index=True, return_inverse=True)
        inverse[left] = rest.reshape(-1) + len(firsts)
        firsts.extend(left[first].tolist())
    return np.array(firsts, np.int64), inverse


def _unchecked(
    buf: np.ndarray, first: np.ndarray, lengths: np.ndarray, sums: np.ndarray
) -> np.ndarray:
    """Indexes of the records whose length CRC or footer is wrong (``sums``:
    the CRC32C of each payload, unmasked)."""
    if not len(first):
        return np.zeros(0, np.int64)
    length_crcs = _uint(buf, first - 4, 4)
    known, inverse = groups(lengths)
    table = [length_crc(int(n)) for n in lengths[known].tolist()]
    expected = np.array(table, np.uint64)[inverse]
    footers = _uint(buf, first + lengths, 4)
    mask = np.uint64(0xFFFFFFFF)
    masked = (((sums >> np.uint64(15)) | (sums << np.uint64(17))) + np.uint64(MASK_DELTA)) & mask
    right = (length_crcs == expected) & ((footers == masked) | (footers == FOOTER_MAGIC_VALUE))
    return np.flatnonzero(~right)


@dataclass(frozen=True, slots=True)
class Scalars:
    """What ``simple_scalars`` read: ``ok[i]`` says record ``i`` is a one-scalar event; for
    those, ``steps[i]``, ``values[i]`` (float32) and ``tag_ids[i]``, an index into ``tags``."""

    ok: np.ndarray
    steps: np.ndarray
    values: np.ndarray
    tag_ids: np.ndarray
    tags: list[str]


def simple_scalars(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Scalars:
    """Read every event that is exactly: wall_time (field 1), step (field 2, optional),
    summary (field 5) of one value holding a tag (field 1) and a ``simple_value`` (field 2),
    every length below 128. ``buf`` is the file's bytes as uint8."""
    count = len(starts)
    size = len(buf)
    last = size - 1
    end = starts + lengths
    ok = (lengths >= 17) & (buf[np.minimum(starts, last)] == 0x09)
    q = np.minimum(starts + 9, last)  # after wall_time
    has_step = buf[q] == 0x10
    # the step varint: up to _MAX_STEP_BYTES bytes, each but the last with its top bit set
    steps = np.zeros(count, np.int64)
    s = q + has_step  # then the summary's field key, once past the step
    going = np.flatnonzero(has_step)
    for k in range(_MAX_STEP_BYTES):
        if not len(going):
            break
        at = s[going]
        digit = buf[np.minimum(at, last)]
        steps[going] |= (digit & 0x7F).astype(np.int64) << (7 * k)
        s[going] = at + 1
        going = going[digit >= 0x80]
    ok[going] = False  # a longer step: the decoder reads it

    def byte(offset: int) -> np.ndarray:
        found: np.ndarray = buf[np.minimum(s + offset, last)].astype(np.int64)
        return found

    summary_size, tag_size = byte(1), byte(5)
    value_at = s + 6 + tag_size  # the simple_value's field key
    ok &= (
        (byte(0) == 0x2A)
        & (byte(2) == 0x0A)
        & (byte(4) == 0x0A)
        & (summary_size < 0x80)
        & (tag_size < 0x80)
        & (byte(3) == summary_size - 2)
        & (s + 2 + summary_size == end)
        & (value_at + 5 == end)
    )
    ok &= buf[np.minimum(value_at, last)] == 0x15
    values = np.zeros(count, np.float32)
    tag_ids = np.zeros(count, np.int64)
    tags: list[str] = []
    rows = np.flatnonzero(ok)
    if len(rows):
        floats = buf[(end[rows] - 4)[:, None] + np.arange(4)]
        values[rows] = np.ascontiguousarray(floats).view("<f4").reshape(-1)
        _read_tags(buf, s[rows] + 6, tag_size[rows], rows, ok, tag_ids, tags)
    return Scalars(ok, steps, values, tag_ids, tags)


def _read_tags(
    buf: np.ndarray,
    first: np.ndarray,
    sizes: np.ndarray,
    rows: np.ndarray,
    ok: np.ndarray,
    tag_ids: np.ndarray,
    tags: list[str],
) -> None:
    """Give each row the id of its tag in ``tags``. Rows are grouped by tag length; a tag is
    read as 8-byte words (the last one may overlap the one before), grouped by a hash of the
    words, and every row's words are compared with its group's (no collision passes). Rows
    whose tag is not UTF-8 are marked not ``ok``."""
    for size in groups_of(sizes):
        picked = sizes == size
        where, at = rows[picked], first[picked]
        if size >= 8:
            starts = sorted({*range(0, size - 7, 8), size - 8})
            words = np.stack([_uint(buf, at + o, 8) for o in starts], axis=1)
        else:  # fewer than 8 bytes: one word of them
            raw = np.zeros((len(at), 8), np.uint8)
            raw[:, :size] = buf[at[:, None] + np.arange(size)]
            words = raw.view("<u8").astype(np.uint64)
        key = words[:, 0].copy()
        for column in range(1, words.shape[1]):  # a polynomial hash over the words
            key = key * np.uint64(1099511628211) + words[:, column]
        first_of, inverse = groups(key)
        same = (words == words[first_of][inverse]).all(axis=1)
        ok[where[~same]] = False
        ids = np.full(len(first_of), -1, np.int64)  # each group's tag id; -1: not UTF-8
        for group, row in enumerate(first_of.tolist()):
            try:
                tag = bytes(buf[at[row] : at[row] + size]).decode()
            except UnicodeDecodeError:
                continue
            ids[group] = len(tags)
            tags.append(tag)
        found = ids[inverse]  # one gather for every row (a mask per group cost groups x rows)
        ok[where[found < 0]] = False
        tag_ids[where[same & (found >= 0)]] = found[same & (found >= 0)]


def groups_of(sizes: np.ndarray) -> list[int]:
    """The distinct values of ``sizes``."""
    first, _ = groups(sizes)
    values: list[int] = sizes[first].tolist()
    return values
