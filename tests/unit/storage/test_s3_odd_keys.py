"""Keys with characters that need encoding, through the lean S3 path and a moto server: listed,
read and found under their own names (signing, URL quoting and listing decoding agree)."""

from __future__ import annotations

import pytest

from evaluator.storage import S3Storage
from tests.support import collect, run_with
from tests.support.s3server import MotoS3

ODD = {
    "events/a b+c&d.tfevents": b"space plus ampersand",
    "events/é/ü~x=y;z.json": b"non-ASCII and sub-delimiters",
    "events/%41%2F.bin": b"percent signs",
    "events/q?x#y.bin": b"query and fragment characters",
}


@pytest.mark.parametrize("key", sorted(ODD))
def test_odd_keys_are_listed_read_and_found_by_their_names(
    s3_server: MotoS3, s3_bucket: str, key: str
) -> None:
    """Each key comes back from a listing exactly, and reads, ranges and exists() find it."""
    s3_server.put_objects(s3_bucket, ODD, prefix="odd/")
    storage = S3Storage(f"s3://{s3_bucket}/odd")

    async def body(s: S3Storage) -> tuple[list[str], bytes, bytes, bool]:
        listed = [o.key for o in await collect(s, "events/")]
        return listed, await s.read(key), await s.read_range(key, 1, 5), await s.exists(key)

    listed, data, part, found = run_with(storage, body)
    assert listed == sorted(ODD)
    assert (data, part, found) == (ODD[key], ODD[key][1:5], True)
