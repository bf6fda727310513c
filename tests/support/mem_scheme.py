"""The ``mem://`` test scheme: a remote scheme registered from outside the storage package, its
buckets ``MemoryStorage``s in a dict, to prove that a new scheme is one ``Scheme`` plus one
``register_scheme`` (reading, ``batch``, ``upload``). ``registered()`` installs it for one test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evaluator.errors import BucketNotFound, StorageError
from evaluator.storage import MemoryStorage, schemes
from evaluator.storage.base import Storage, Uploader
from evaluator.storage.schemes import Scheme, register_scheme, split_remote

__all__ = ["BUCKETS", "MEM_SCHEME", "OPENED", "READ_ONLY_MEM_SCHEME", "registered"]

OPENED: list[tuple[str, dict[str, Any]]] = []
BUCKETS: dict[str, MemoryStorage] = {}  # by URI; an upload writes to "mem://<bucket>"


def _open_mem(uri: str, **options: Any) -> Storage:
    """The test scheme's backend: the in-memory store registered under the URI."""
    OPENED.append((uri, options))
    if uri not in BUCKETS:
        raise StorageError(f"{uri} does not exist", uri=uri)
    return BUCKETS[uri]


class MemUploader:
    """Writes ``<prefix>/<key>`` into the ``MemoryStorage`` of ``mem://<bucket>``."""

    def __init__(self, uri: str, **options: Any) -> None:
        bucket, prefix = split_remote(uri)
        self.root, self.prefix, self.options = f"mem://{bucket}", prefix.strip("/"), options

    @property
    def uri(self) -> str:
        return f"{self.root}/{self.prefix}" if self.prefix else self.root

    def ready(self, create: bool) -> None:
        if self.root not in BUCKETS:
            if not create:
                raise BucketNotFound(f"bucket {self.root!r} does not exist", uri=self.uri)
            BUCKETS[self.root] = MemoryStorage(uri=self.root)

    def put_file(self, key: str, path: Path) -> None:
        BUCKETS[self.root].put(f"{self.prefix}/{key}" if self.prefix else key, path.read_bytes())

    def close(self) -> None:
        return None


def _uploader(uri: str, **options: Any) -> Uploader:
    return MemUploader(uri, **options)


READ_ONLY_MEM_SCHEME = Scheme(
    prefix="mem://",
    form="mem://<bucket>/<prefix>",
    pattern=re.compile(r"mem://[a-z0-9-]+(/\S*)?"),
    opener=_open_mem,
)
MEM_SCHEME = Scheme(
    prefix=READ_ONLY_MEM_SCHEME.prefix,
    form=READ_ONLY_MEM_SCHEME.form,
    pattern=READ_ONLY_MEM_SCHEME.pattern,
    opener=_open_mem,
    uploader=_uploader,
)


@contextmanager
def registered(scheme: Scheme = MEM_SCHEME) -> Iterator[None]:
    """``scheme`` registered (next to ``s3://``) until the block ends; the buckets emptied."""
    saved = dict(schemes._SCHEMES)
    register_scheme(scheme)
    OPENED.clear()
    try:
        yield
    finally:
        schemes._SCHEMES.clear()
        schemes._SCHEMES.update(saved)
        BUCKETS.clear()
