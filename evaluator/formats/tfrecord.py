"""TFRecord framing of smdebug event files: bytes in, records out, no I/O.

Each record is::

    uint64 LE  length N of the payload
    uint32 LE  masked CRC32C of those 8 length bytes
    N bytes    payload (a serialized ``Event``)
    uint32 LE  footer

smdebug writes the constant ``FOOTER_MAGIC`` as the footer; TensorBoard writes the masked CRC of
the payload. Both are accepted. Index byte ranges cover the whole record (16 + N bytes).

Two failures are kept apart on purpose: data that *ends* inside a record raises
``IncompleteRecord`` (a writer is still appending: come back later from the same offset), while
bytes that are all there but wrong raise ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from evaluator.errors import CorruptRecordError, IncompleteRecord
from evaluator.formats.crc import FOOTER_MAGIC, FOOTER_MAGIC_VALUE, masked_crc32c

__all__ = [
    "FOOTER_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "KNOWN_LENGTH_CRCS",
    "RECORD_OVERHEAD",
    "Record",
    "encode_record",
    "iter_records",
    "length_crc",
    "parse_frame",
    "read_record",
]

_LENGTH = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")
_UINT32 = struct.Struct("<I")
HEADER_SIZE = 12  # length + length CRC
FOOTER_SIZE = 4
RECORD_OVERHEAD = HEADER_SIZE + FOOTER_SIZE
# A length past this is corruption, even in a file still being written (not worth waiting
# for): 16 GiB, far above a tensor the hooks write in one record.
MAX_PAYLOAD = 1 << 34

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Record:
    """One framed record: where it starts, its whole size (16 + N), and its payload."""

    offset: int
    length: int
    payload: bytes | memoryview


def encode_record(payload: bytes, *, payload_crc: bool = False) -> bytes:
    """Frame ``payload`` as smdebug does, or with the real payload CRC as TensorBoard does."""
    length = _LENGTH.pack(len(payload))
    footer = _UINT32.pack(masked_crc32c(payload)) if payload_crc else FOOTER_MAGIC
    return b"".join((length, _UINT32.pack(masked_crc32c(length)), payload, footer))


def read_record(buf: Buffer, offset: int = 0, *, source: str = "<bytes>") -> Record:
    """Parse the record starting at ``offset`` of ``buf``.

    A ``bytes`` buffer gives a ``bytes`` payload; any other buffer gives a ``memoryview`` into
    it (no copy). ``source`` only names the data in errors.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    payload, total = _frame(buf, offset, source, offset)
    return Record(offset, total, payload)


def parse_frame(
    buf: Buffer, *, source: str = "<bytes>", label_offset: int = 0, exact: bool = False
) -> bytes | memoryview:
    """The payload of the record at the start of ``buf``: the lean path for index byte ranges.

    ``label_offset`` is where ``buf`` starts in ``source`` (errors report it). With ``exact``,
    bytes after the record, or a length past the range's end, are corrupt: an index range
    must hold exactly one record.
    """
    try:
        payload, total = _frame(buf, 0, source, label_offset)
    except IncompleteRecord as e:
        if not exact:
            raise
        # an index range is a whole record: a length past its end is wrong, not unwritten
        reason = (
            f"its length field claims {e.needed - RECORD_OVERHEAD} bytes, "
            f"but its byte range holds {len(buf)}"
        )
        raise CorruptRecordError(source, label_offset, reason) from None
    if exact and total != len(buf):
        reason = f"byte range holds {len(buf)} bytes but its record is {total} bytes"
        raise CorruptRecordError(source, label_offset, reason)
    return payload


def _frame(buf: Buffer, pos: int, source: str, label: int) -> tuple[bytes | memoryview, int]:
    """(payload, whole record size) of the record at ``pos``; errors name offset ``label``."""
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise IncompleteRecord(source, label, HEADER_SIZE, max(0, available))
    n, length_crc = _HEADER.unpack_from(buf, pos)
    expected = _LENGTH_CRCS.get(n)
    if expected is None:
        expected = _length_crc(n)
    if length_crc != expected:
        reason = f"length CRC {length_crc:#010x} does not match computed {expected:#010x}"
        raise CorruptRecordError(source, label, reason)
    if n > MAX_PAYLOAD:
        reason = f"its length field claims {n} bytes, more than any record holds ({MAX_PAYLOAD})"
        raise CorruptRecordError(source, label, reason)
    total = n + RECORD_OVERHEAD
    if available < total:
        raise IncompleteRecord(source, label, total, available)
    start = pos + HEADER_SIZE
    end = start + n
    payload = buf[start:end] if isinstance(buf, bytes) else memoryview(buf)[start:end]
    if buf[end : end + FOOTER_SIZE] != FOOTER_MAGIC:
        _check_payload_crc(buf, payload, end, source, label)
    return payload, total


def smdebug_payload(buf: Buffer) -> Buffer | None:
    """The payload when ``buf`` is exactly one record with a verified length CRC and smdebug's
    footer constant; None for anything else (the caller then takes the checked path, which
    explains what is wrong). The common case, as cheap as it can be."""
    size = len(buf)
    if size < RECORD_OVERHEAD:
        return None
    n, length_crc = _HEADER.unpack_from(buf, 0)
    if n + RECORD_OVERHEAD != size or _LENGTH_CRCS.get(n) != length_crc:
        return None
    if buf[size - FOOTER_SIZE :] != FOOTER_MAGIC:
        return None
    return buf[HEADER_SIZE : size - FOOTER_SIZE]


# A trial's records have few distinct lengths, so the length CRC is nearly always looked up.
_LENGTH_CRCS: dict[int, int] = {}
_LENGTH_CRCS_MAX = 4096
#: For framing loops of their own: ``HEADER.unpack_from(buf, pos)`` is (length, length CRC),
#: and ``KNOWN_LENGTH_CRCS.get(length)`` the expected CRC when memoized (else ``length_crc``).
HEADER = _HEADER
KNOWN_LENGTH_CRCS = _LENGTH_CRCS


def length_crc(n: int) -> int:
    """The masked CRC of a record's 8 length bytes for payload length ``n`` (memoized)."""
    crc = _LENGTH_CRCS.get(n)
    return crc if crc is not None else _length_crc(n)


def _length_crc(n: int) -> int:
    crc = masked_crc32c(_LENGTH.pack(n))
    if len(_LENGTH_CRCS) < _LENGTH_CRCS_MAX:
        _LENGTH_CRCS[n] = crc
    return crc


def _check_payload_crc(buf: Buffer, payload: Buffer, at: int, source: str, label: int) -> None:
    (footer,) = _UINT32.unpack_from(buf, at)
    computed = masked_crc32c(payload)
    if footer != computed:
        reason = (
            f"footer {footer:#010x} is neither smdebug's constant {FOOTER_MAGIC_VALUE:#010x} "
            f"nor the payload CRC {computed:#010x}"
        )
        raise CorruptRecordError(source, label, reason)


def iter_records(buf: Buffer, *, source: str, start: int = 0) -> Iterator[Record]:
    """Yield the records of ``buf`` from ``start`` on.

    A torn last record raises ``IncompleteRecord`` after every complete record was yielded; its
    ``offset`` is where to resume once more data has arrived.
    """
    offset = start
    end = len(buf)
    while offset < end:
        record = read_record(buf, offset, source=source)
        yield record
        offset += record.length
