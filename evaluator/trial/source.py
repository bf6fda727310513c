"""The async side of a trial: what it reads from storage, and how.

``TrialSource`` lists and parses index and collection files and fetches event-file bytes. It
knows the key layout and the formats, holds no trial state, and runs on the background loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from evaluator.errors import CollectionFilesTimeout, MissingCollectionFiles, ObjectNotFound
from evaluator.formats.collections_file import CollectionsFile, parse_collections_file
from evaluator.formats.index_file import IndexFile, parse_index_file
from evaluator.formats.keys import (
    COLLECTIONS_PREFIX,
    END_OF_JOB_KEY,
    INDEX_PREFIX,
    is_collections_key,
    is_index_key,
    parse_index_key,
    worker_from_collections_key,
)
from evaluator.storage.base import Storage
from evaluator.trial.gcpause import gc_paused

__all__ = ["IndexScan", "LoadedCollections", "ParsedIndex", "TrialSource"]


@dataclass(frozen=True, slots=True)
class ParsedIndex:
    key: str
    step: int
    worker: str
    index: IndexFile


@dataclass(frozen=True, slots=True)
class IndexScan:
    """New index files in key order, and the last key the listing returned (None if none)."""

    files: list[ParsedIndex]
    last_key: str | None


@dataclass(frozen=True, slots=True)
class LoadedCollections:
    manifest: CollectionsFile
    workers: set[str]
    keys: list[str]


class TrialSource:
    """Reads one trial's files through a ``Storage``."""

    def __init__(self, storage: Storage, *, index_read_concurrency: int = 64) -> None:
        self.storage = storage
        self._concurrency = index_read_concurrency

    async def training_ended(self) -> bool:
        return await self.storage.exists(END_OF_JOB_KEY)

    # ------------------------------------------------------------------ collections

    async def collection_keys(self) -> list[str]:
        return [o.key async for o in self.storage.list_after(COLLECTIONS_PREFIX)
                if is_collections_key(o.key)]

    async def load_collections(self, *, timeout: float, poll_interval: float) -> LoadedCollections:
        """Wait until the collection files of every worker exist, then parse the first one.

        Ends with ``MissingCollectionFiles`` as soon as training has ended without them, and
        with ``CollectionFilesTimeout`` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        needed = 1
        manifest: CollectionsFile | None = None
        while True:
            keys = await self.collection_keys()
            if keys and manifest is None:
                manifest = parse_collections_file(await self.storage.read(keys[0]))
                needed = manifest.num_workers
            if manifest is not None and len(keys) >= needed:
                workers = {worker_from_collections_key(k) for k in keys}
                return LoadedCollections(manifest, workers, keys)
            if await self.training_ended():
                raise MissingCollectionFiles()
            if time.monotonic() >= deadline:
                raise CollectionFilesTimeout(self.storage.uri, timeout, len(keys), needed)
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------------ index files

    async def scan_index(self, start_after: str | None, already_read: set[str],
                         range_steps: tuple[int | None, int | None] | None) -> IndexScan:
        """List index files after ``start_after`` and parse the ones not read before."""
        wanted: list[tuple[str, int, str]] = []
        last_key: str | None = None
        async for obj in self.storage.list_after(INDEX_PREFIX, start_after):
            last_key = obj.key
            if obj.key in already_read or not is_index_key(obj.key):
                continue
            step, worker = parse_index_key(obj.key)
            if range_steps is not None and not _in_range(step, range_steps):
                continue
            wanted.append((obj.key, step, worker))
        semaphore = asyncio.Semaphore(self._concurrency)

        async def fetch(key: str) -> bytes:
            async with semaphore:
                return await self.storage.read(key)

        blobs = await asyncio.gather(*(fetch(key) for key, _, _ in wanted))
        with gc_paused():
            files = [ParsedIndex(key, step, worker, parse_index_file(blob))
                     for (key, step, worker), blob in zip(wanted, blobs)]
        return IndexScan(files, last_key)

    # ------------------------------------------------------------------ event files

    async def read_event_bytes(self, key: str, start: int, end: int, *, wait: float,
                               poll_interval: float) -> bytes | None:
        """Bytes ``[start, end)`` of an event file; None if it never appeared within ``wait``
        seconds or training ended without it."""
        deadline = time.monotonic() + wait
        while True:
            try:
                data = await self.storage.read_range(key, start, end)
            except ObjectNotFound:
                data = None
            if data is not None and len(data) >= end - start:
                return data
            if await self.training_ended() or time.monotonic() >= deadline:
                return data if data else None
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))


def _in_range(step: int, range_steps: tuple[int | None, int | None]) -> bool:
    begin, end = range_steps
    return (begin is None or begin <= step) and (end is None or step < end)
