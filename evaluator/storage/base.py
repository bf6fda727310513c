"""The storage seam: four async operations over keys relative to a trial root.

Everything above this module speaks in *keys*: ``/``-separated paths relative to the trial's
root (``index/000000000/000000000007_worker_0.json``), never in file paths or S3 URIs.
Each backend translates keys, retries and errors once, here at the boundary, raising only
the ``StorageError`` family from ``evaluator.errors``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["FolderLister", "ObjectInfo", "Storage", "SyncRangeReader", "Uploader"]


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object: its key (relative to the root) and size in bytes."""

    key: str
    size: int


@runtime_checkable
class Storage(Protocol):
    """Read-only access to one trial root. Implementations: local folder, S3, in-memory."""

    @property
    def uri(self) -> str:
        """The root as the user gave it (a folder path or ``s3://bucket/prefix``), for messages."""
        ...

    def list_after(self, prefix: str, start_after: str | None = None) -> AsyncIterator[ObjectInfo]:
        """Yield objects whose key starts with ``prefix`` and sorts strictly after ``start_after``.

        Keys come in ascending byte order (S3's order), one page at a time. ``prefix`` is a
        plain string prefix, not a folder (``"index/"``, ``"collections/000000000/"``). Files
        still being written under a temporary name (``*.tmp``) are not listed.
        """
        ...

    async def read(self, key: str) -> bytes:
        """The whole object. Raises ``ObjectNotFound`` when it does not exist."""
        ...

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (half-open). Fewer bytes come back only when the
        object is shorter than ``end``. Raises ``ObjectNotFound`` when it does not exist."""
        ...

    async def exists(self, key: str) -> bool:
        """Whether an object with exactly this key exists."""
        ...

    async def aclose(self) -> None:
        """Release connections and threads. Idempotent."""
        ...


@runtime_checkable
class SyncRangeReader(Protocol):
    """Optional capability of backends whose reads never wait on a network (local folder,
    memory): ``read_range`` answered in the calling thread, saving the hop to the event loop
    that a synchronous caller otherwise pays on every read. Same contract as ``read_range``."""

    def read_range_sync(self, key: str, start: int, end: int) -> bytes: ...


class FolderLister(Protocol):
    """What a location holds directly (``rule-evaluator batch``'s prefix expansion): one per
    scheme and batch, so a client opened for the first folder serves the next ones."""

    def children(self, location: str) -> tuple[set[str], set[str]]:
        """``(sub-folder names, file names)`` directly in ``location``; a
        ``ConfigurationError`` naming it when it cannot be listed."""
        ...


class Uploader(Protocol):
    """Writes files as objects under one destination root (``rule-evaluator upload``): the
    optional capability of a scheme (``Scheme.uploader``); local folders always have it. Keys
    are relative to the root, as for ``Storage``. Failures are ``StorageError``s whose messages
    name URIs and codes, never a credential."""

    @property
    def uri(self) -> str:
        """Where the objects go, spelled for messages (a local folder as an absolute path)."""
        ...

    def ready(self, create: bool) -> None:
        """Check, once before the first file, that objects can be written: a store still
        starting is waited for, an unreachable one fails here. A missing container (an S3
        bucket) is created when ``create``, else ``BucketNotFound`` names it."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        """Write the file at ``path`` as the object ``key`` (replacing one there). A reader of
        the destination never sees a partly written object."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...
