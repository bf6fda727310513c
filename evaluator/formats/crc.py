"""Masked CRC32C, the checksum of TFRecord framing.

TFRecord stores ``mask(crc32c(data))`` rather than the raw CRC so that a CRC computed over data
that itself contains CRCs stays well distributed. smdebug's event writer puts a *constant* in
the footer of each record instead of the payload's CRC: the masked CRC of the 10 ASCII bytes
``0x12345678``. That constant is ``FOOTER_MAGIC``.
"""

from __future__ import annotations

import struct

import google_crc32c

__all__ = ["FOOTER_MAGIC", "FOOTER_MAGIC_VALUE", "MASK_DELTA", "mask_crc32c", "masked_crc32c"]

MASK_DELTA = 0xA282EAD8  # added after the rotation (for loops that mask inline)
_MASK_DELTA = MASK_DELTA


def mask_crc32c(crc: int) -> int:
    """Rotate right by 15 bits and add TFRecord's constant, modulo 2**32."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The masked CRC32C (Castagnoli) of ``data``, as TFRecord stores it."""
    # The C extension takes only ``bytes``.
    raw = data if isinstance(data, bytes) else bytes(data)
    return mask_crc32c(google_crc32c.value(raw))


# smdebug's CHECKSUM_MAGIC_BYTES is the text "0x12345678", not the number.
FOOTER_MAGIC_VALUE: int = masked_crc32c(b"0x12345678")
FOOTER_MAGIC: bytes = struct.pack("<I", FOOTER_MAGIC_VALUE)
