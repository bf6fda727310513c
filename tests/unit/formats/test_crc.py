"""Masked CRC32C and smdebug's constant footer."""

from __future__ import annotations

import struct

import google_crc32c
import pytest

from evaluator.formats.crc import FOOTER_MAGIC, FOOTER_MAGIC_VALUE, mask_crc32c, masked_crc32c


def test_crc32c_check_value() -> None:
    """The underlying CRC is Castagnoli: crc32c("123456789") is 0xE3069283."""
    assert google_crc32c.value(b"123456789") == 0xE3069283


def test_footer_magic_is_masked_crc_of_ascii_text() -> None:
    """The footer is the masked CRC of the 10 ASCII bytes "0x12345678", stored b3 c0 2d 06."""
    assert google_crc32c.value(b"0x12345678") == 0x6AEDB1D5
    assert FOOTER_MAGIC_VALUE == 0x062DC0B3
    assert FOOTER_MAGIC == bytes.fromhex("b3c02d06")


@pytest.mark.parametrize(
    ("length", "stored"),
    [(66, "79f36eaa"), (67, "b18525a0"), (72, "fe92489d"), (95, "503f2886"), (0, "29039807")],
)
def test_length_crc_examples_of_appendix_a(length: int, stored: str) -> None:
    """The masked CRC of an 8-byte little-endian length matches the spec's Appendix A bytes."""
    assert struct.pack("<I", masked_crc32c(struct.pack("<Q", length))).hex() == stored


def test_mask_rotates_and_adds_delta() -> None:
    """Masking rotates right by 15 bits and adds 0xA282EAD8 modulo 2**32."""
    assert mask_crc32c(0) == 0xA282EAD8
    assert mask_crc32c(1 << 15) == (1 + 0xA282EAD8) & 0xFFFFFFFF


def test_masked_crc_accepts_any_buffer() -> None:
    """bytes, bytearray and memoryview of the same data give the same CRC."""
    data = b"some payload"
    assert masked_crc32c(data) == masked_crc32c(bytearray(data)) == masked_crc32c(memoryview(data))
