"""TFRecord framing: encode, read, iterate; corrupt versus incomplete."""

from __future__ import annotations

import struct

import pytest

from evaluator.errors import CorruptRecordError, IncompleteRecord
from evaluator.formats.crc import FOOTER_MAGIC, masked_crc32c
from evaluator.formats.tfrecord import (
    RECORD_OVERHEAD,
    Record,
    encode_record,
    iter_records,
    length_crc,
    parse_frame,
    read_record,
)
from tests.unit.formats.fixture_files import EVENT_FILES, file_id

PAYLOAD = b"\x0a\x03abc" * 10


def test_encode_layout() -> None:
    """A record is length, masked length CRC, payload and smdebug's constant footer."""
    record = encode_record(PAYLOAD)
    assert record[:8] == struct.pack("<Q", len(PAYLOAD))
    assert record[8:12] == struct.pack("<I", masked_crc32c(record[:8]))
    assert record[12:-4] == PAYLOAD
    assert record[-4:] == FOOTER_MAGIC
    assert len(record) == len(PAYLOAD) + RECORD_OVERHEAD


def test_encode_with_payload_crc_writes_the_real_crc() -> None:
    """payload_crc=True writes the masked payload CRC as the footer, as TensorBoard does."""
    record = encode_record(PAYLOAD, payload_crc=True)
    assert record[-4:] == struct.pack("<I", masked_crc32c(PAYLOAD))


def test_read_record_round_trip() -> None:
    """read_record returns the payload, the offset and the whole record length."""
    assert read_record(encode_record(PAYLOAD)) == Record(0, len(PAYLOAD) + 16, PAYLOAD)


def test_read_record_at_offset() -> None:
    """A record is read from any offset of a larger buffer."""
    first, second = encode_record(b"one"), encode_record(b"second")
    record = read_record(first + second, len(first))
    assert (record.offset, record.length, record.payload) == (len(first), len(second), b"second")


def test_footer_with_real_payload_crc_is_accepted() -> None:
    """A footer holding the real payload CRC (TensorBoard files) is accepted."""
    assert read_record(encode_record(PAYLOAD, payload_crc=True)).payload == PAYLOAD


def test_empty_payload() -> None:
    """A zero-length payload frames and reads back."""
    record = encode_record(b"")
    assert record[:12].hex() == "0000000000000000" + "29039807"
    assert read_record(record).payload == b""


def test_non_bytes_buffers_give_memoryview_payloads() -> None:
    """bytearray and memoryview buffers give a zero-copy memoryview payload."""
    data = encode_record(PAYLOAD)
    for buf in (bytearray(data), memoryview(data)):
        payload = read_record(buf).payload
        assert isinstance(payload, memoryview)
        assert bytes(payload) == PAYLOAD


def test_corrupted_length_crc_is_corrupt() -> None:
    """A length CRC mismatch is CorruptRecordError naming the source and offset."""
    data = bytearray(b"xx" + encode_record(PAYLOAD))
    data[2 + 9] ^= 0xFF
    with pytest.raises(CorruptRecordError) as info:
        read_record(bytes(data), 2, source="events/x.tfevents")
    assert (info.value.source, info.value.offset) == ("events/x.tfevents", 2)
    assert "length CRC" in str(info.value)


def test_corrupted_length_is_corrupt_not_incomplete() -> None:
    """A damaged length byte fails the length CRC before the size is trusted."""
    data = bytearray(encode_record(PAYLOAD))
    data[3] = 0x7F  # now claims a huge payload
    with pytest.raises(CorruptRecordError):
        read_record(bytes(data))


def test_corrupted_footer_is_corrupt() -> None:
    """A footer that is neither the constant nor the payload CRC is corrupt."""
    data = bytearray(encode_record(PAYLOAD))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="footer"):
        read_record(bytes(data))


def test_payload_crc_footer_detects_a_damaged_payload() -> None:
    """With a real payload CRC as footer, a damaged payload byte is detected."""
    data = bytearray(encode_record(PAYLOAD, payload_crc=True))
    data[14] ^= 0x01
    with pytest.raises(CorruptRecordError):
        read_record(bytes(data))


@pytest.mark.parametrize("cut", [0, 1, 7, 8, 11])
def test_torn_header_is_incomplete(cut: int) -> None:
    """Data ending inside the 12-byte header raises IncompleteRecord, not corrupt."""
    with pytest.raises(IncompleteRecord) as info:
        read_record(encode_record(PAYLOAD)[:cut], source="s")
    assert (info.value.offset, info.value.needed, info.value.available) == (0, 12, cut)


@pytest.mark.parametrize("cut", [12, 13, 12 + len(PAYLOAD) - 1])
def test_torn_payload_is_incomplete(cut: int) -> None:
    """Data ending inside the payload raises IncompleteRecord with the bytes needed."""
    with pytest.raises(IncompleteRecord) as info:
        read_record(encode_record(PAYLOAD)[:cut])
    assert (info.value.needed, info.value.available) == (len(PAYLOAD) + 16, cut)


@pytest.mark.parametrize("missing", [1, 2, 4])
def test_torn_footer_is_incomplete(missing: int) -> None:
    """Data ending inside the footer raises IncompleteRecord."""
    with pytest.raises(IncompleteRecord):
        read_record(encode_record(PAYLOAD)[:-missing])


def test_offset_past_the_end_is_incomplete() -> None:
    """An offset at or beyond the end means nothing has arrived there yet."""
    with pytest.raises(IncompleteRecord) as info:
        read_record(b"abc", 10)
    assert info.value.available == 0


def test_negative_offset_is_rejected() -> None:
    """A negative offset is a caller error."""
    with pytest.raises(ValueError):
        read_record(encode_record(PAYLOAD), -1)


def test_iter_records_yields_complete_then_raises_incomplete() -> None:
    """A torn tail raises IncompleteRecord after every complete record, at the resume offset."""
    data = encode_record(b"a") + encode_record(b"bb")
    torn = data + encode_record(b"ccc")[:-2]
    seen = []
    with pytest.raises(IncompleteRecord) as info:
        for record in iter_records(torn, source="f"):
            seen.append(record.payload)
    assert seen == [b"a", b"bb"]
    assert info.value.offset == len(data)


def test_iter_records_from_start() -> None:
    """iter_records resumes from a given start offset."""
    first = encode_record(b"a")
    data = first + encode_record(b"bb")
    assert [r.payload for r in iter_records(data, source="f", start=len(first))] == [b"bb"]


def test_iter_records_of_empty_buffer() -> None:
    """No bytes means no records and no error."""
    assert list(iter_records(b"", source="f")) == []


def test_parse_frame_exact_rejects_trailing_bytes() -> None:
    """An index byte range must hold exactly one record."""
    with pytest.raises(CorruptRecordError, match="byte range"):
        parse_frame(encode_record(PAYLOAD) + b"\0", exact=True)


def test_parse_frame_labels_errors_with_the_file_offset() -> None:
    """Errors from a byte range report the range's offset in its file."""
    with pytest.raises(IncompleteRecord) as info:
        parse_frame(encode_record(PAYLOAD)[:20], source="f", label_offset=4096)
    assert info.value.offset == 4096


@pytest.mark.parametrize("path", EVENT_FILES, ids=file_id)
def test_every_fixture_event_file_frames_cleanly(path) -> None:
    """Every smdebug-written event file is a whole number of valid records."""
    data = path.read_bytes()
    records = list(iter_records(data, source=str(path)))
    assert sum(r.length for r in records) == len(data)
    assert all(data[r.offset + r.length - 4 : r.offset + r.length] == FOOTER_MAGIC for r in records)


@pytest.mark.parametrize("length", [1 << 40, 1 << 62])
def test_an_absurd_length_is_corrupt_not_incomplete(length: int) -> None:
    """A length field of 2^40 with a valid CRC is corruption (a clean CorruptRecordError naming
    the file), never a wait for bytes that cannot come."""
    data = struct.pack("<Q", length) + struct.pack("<I", length_crc(length)) + b"x" * 20
    with pytest.raises(CorruptRecordError, match="claims"):
        list(iter_records(data, source="f.tfevents"))
    with pytest.raises(CorruptRecordError, match="f.tfevents"):
        parse_frame(data, source="f.tfevents", exact=True)


def test_a_length_past_an_exact_range_is_corrupt_not_incomplete() -> None:
    """An index byte range holds one whole record: a length field of 2^33 (its CRC right)
    inside it is a CorruptRecordError naming the file and offset (before: IncompleteRecord,
    which ended a run with exit 3)."""
    length = 1 << 33
    data = struct.pack("<Q", length) + struct.pack("<I", length_crc(length)) + b"x" * 20
    with pytest.raises(CorruptRecordError, match=r"f.tfevents at byte offset 7: .*8589934592"):
        parse_frame(data, source="f.tfevents", label_offset=7, exact=True)
    with pytest.raises(IncompleteRecord):
        parse_frame(data, source="f.tfevents")
