"""The async side of a trial: what it reads from storage, and how.

``SmdebugSource`` lists and parses index and collection files and fetches event-file bytes. It
knows the key layout and the formats, holds no trial state, and runs on the background loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Literal, cast

import structlog

from evaluator.engine.gcpause import gc_paused
from evaluator.engine.options import TrialOptions
from evaluator.engine.source import IndexScan, LoadedCollections, ParsedIndex, StepRange
from evaluator.engine.source_base import SourceBase
from evaluator.engine.waits import WaitNotice
from evaluator.errors import (
    CollectionFilesTimeout,
    IndexReaderException,
    MissingCollectionFiles,
    ObjectNotFound,
    SMDebugValueError,
)
from evaluator.formats.collections_file import CollectionsFile, parse_collections_file
from evaluator.formats.index_file import IndexParser
from evaluator.formats.keys import (
    COLLECTIONS_PREFIX,
    END_OF_JOB_KEY,
    INDEX_PREFIX,
    is_collections_key,
    is_index_key,
    parse_index_key,
    worker_from_collections_key,
)
from evaluator.sources.smdebug.index_listing import IndexListing
from evaluator.sources.smdebug.state import IndexedState
from evaluator.storage.base import ObjectInfo, Storage

if TYPE_CHECKING:
    from evaluator.engine.cache import TrialCache
    from evaluator.engine.runner import BackgroundLoop
    from evaluator.engine.view import TrialView
    from evaluator.sources.smdebug.values import FileValues

__all__ = ["SmdebugSource"]

log = structlog.get_logger("evaluator.trial")


MiB = 1024 * 1024
INDEX_CHUNK = 1000  # index files parsed before they are handed on (see ``scan``)


class SmdebugSource(SourceBase):
    """Reads one trial's files through a ``Storage``, refusing files over ``options``' limits
    (``max_index_file_mb``, ``max_index_entries``, ``max_collections_file_mb``,
    ``max_regex_length``) as bad data, with errors that name the file and the limit. Its
    trial state is an ``IndexedState``; its scans list index files (``scan``)."""

    kind = "smdebug"
    state_type = IndexedState
    storage: Storage

    def __init__(self, storage: Storage, *, options: TrialOptions | None = None) -> None:
        self.storage = storage
        self.options = options = options or TrialOptions()
        self._concurrency = options.index_read_concurrency
        self._max_index_bytes = int(options.max_index_file_mb * MiB)
        self._max_collections_bytes = int(options.max_collections_file_mb * MiB)
        self._index_parser = IndexParser()  # reuses the parse of payloads repeated step to step

    async def aclose(self) -> None:
        await self.storage.aclose()

    def describe(self) -> dict[str, Any]:
        return {"kind": "smdebug output (collections, index and event files)"}

    def index_listing(self, path: str, run: Any, *, retry_limit: int) -> IndexListing:
        """smdebug's ``trial.index_reader``: the index and event files, listed."""
        return IndexListing(path, self.storage, run, retry_limit=retry_limit)

    def open_values(self, cache: TrialCache, view: TrialView, loop: BackgroundLoop) -> FileValues:
        from evaluator.sources.smdebug.values import FileValues

        return FileValues(cache, self, view, loop)

    # ------------------------------------------------------------------ collections

    async def collection_keys(self) -> list[str]:
        return [o.key for o in await self._collection_objects()]

    async def _collection_objects(self) -> list[ObjectInfo]:
        return [
            o
            async for o in self.storage.list_after(COLLECTIONS_PREFIX)
            if is_collections_key(o.key)
        ]

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections:
        """Wait until the collection files of every worker exist, then parse the first one.

        Ends with ``MissingCollectionFiles`` as soon as training has ended without them, and
        with ``CollectionFilesTimeout`` after ``timeout`` seconds. While waiting, says so every
        ``wait_log_interval`` seconds, and once at the start when the location is empty.
        """
        deadline = time.monotonic() + timeout
        needed = 1
        manifest: CollectionsFile | None = None
        notice: WaitNotice | None = None
        while True:
            listed = await self._collection_objects()
            keys = [o.key for o in listed]
            if notice is None and not keys:
                notice = WaitNotice(
                    "collection files",
                    self.storage.uri,
                    interval=wait_log_interval,
                    ends_when=f"they appear, training ends without them, or {timeout:g} s pass",
                    to_change="EVALUATOR_COLLECTION_WAIT_TIMEOUT sets the seconds",
                )
                if await self._is_empty():
                    log.info(
                        "trial_empty",
                        trial=self.storage.uri,
                        awaited="collection files",
                        timeout_seconds=timeout,
                    )
            elif notice is not None:
                notice.tick(f"collection files of {needed} worker(s), {len(keys)} found")
            if keys and manifest is None:
                manifest = await self._read_collections(listed[0])
                needed = manifest.num_workers
            if manifest is not None and len(keys) >= needed:
                workers = {worker_from_collections_key(k) for k in keys}
                return LoadedCollections(manifest, workers, keys)
            if await self.training_ended():
                raise MissingCollectionFiles()
            if time.monotonic() >= deadline:
                raise CollectionFilesTimeout(self.storage.uri, timeout, len(keys), needed)
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))

    async def _read_collections(self, obj: ObjectInfo) -> CollectionsFile:
        """One collections file, refused unread when the listing says it is too large, and
        refused when a collection's include_regex is longer than ``max_regex_length``."""
        where = f"collections file {self.storage.uri.rstrip('/')}/{obj.key}"
        limit = self._max_collections_bytes
        if obj.size > limit:
            raise SMDebugValueError(
                f"{where} is {obj.size} bytes, over the limit of {limit} "
                "(max_collections_file_mb): refused as bad data"
            )
        data = await self.storage.read(obj.key)
        manifest = parse_collections_file(data, max_bytes=limit, source=where)
        longest = self.options.max_regex_length
        for collection in manifest.collections.values():
            for pattern in collection.include_regex:
                if len(pattern) > longest:
                    raise SMDebugValueError(
                        f"{where}: include_regex of collection {collection.name!r} is "
                        f"{len(pattern)} characters long, over the limit of {longest} "
                        "(max_regex_length)"
                    )
        return manifest

    async def _is_empty(self) -> bool:
        """Whether the trial location holds no object at all (one listing, first key only)."""
        pages = cast(AsyncGenerator[ObjectInfo, None], self.storage.list_after(""))
        async with contextlib.aclosing(pages) as listing:
            async for _ in listing:
                return False
        return True

    # ------------------------------------------------------------------ index files

    async def scan(
        self,
        start_after: str | None,
        already_read: frozenset[str] | set[str],
        range_steps: StepRange,
        *,
        with_end_marker: bool,
        apply_chunk: Callable[[list[ParsedIndex], str], None] | None = None,
    ) -> IndexScan:
        """List index files after ``start_after`` and parse the ones not read before.

        With ``apply_chunk``, files are read ``INDEX_CHUNK`` at a time and each chunk but the
        last is handed to ``apply_chunk(files, last key of the chunk)`` as soon as it is
        parsed, so that a trial of many steps never holds all its parsed files at once; the
        scan returned holds the last chunk.

        With ``with_end_marker`` the listing starts at the trial root instead of ``index/``:
        ``training_job_end.ts`` sorts after every index key, so one LIST request answers both
        "what is new" and "has training ended". Keys found between the two (an unexpected
        folder) are reported, so the caller can go back to listing ``index/`` alone.
        """
        prefix = "" if with_end_marker else INDEX_PREFIX
        wanted: list[tuple[str, int, str]] = []
        last_key: str | None = None
        end_marker = other_keys = False
        # Every backend's listing is an async generator: closed here when we stop early.
        pages = cast(
            AsyncGenerator[ObjectInfo, None],
            self.storage.list_after(prefix, start_after or INDEX_PREFIX),
        )
        async with contextlib.aclosing(pages) as listing:
            async for obj in listing:
                key = obj.key
                if not key.startswith(INDEX_PREFIX):
                    if key == END_OF_JOB_KEY:
                        end_marker = True
                    elif key > END_OF_JOB_KEY:
                        break
                    else:
                        other_keys = True
                    continue
                last_key = key
                if key in already_read or not is_index_key(key):
                    continue
                step, worker = parse_index_key(key)
                if range_steps is not None and not _in_range(step, range_steps):
                    continue
                if obj.size > self._max_index_bytes:  # refused before it is read
                    raise IndexReaderException(
                        f"index file {self._where(key)} is {obj.size} bytes, over the limit "
                        f"of {self._max_index_bytes} (max_index_file_mb): refused as bad data"
                    )
                wanted.append((key, step, worker))
        if apply_chunk is not None:
            while len(wanted) > INDEX_CHUNK:
                chunk, wanted = wanted[:INDEX_CHUNK], wanted[INDEX_CHUNK:]
                apply_chunk(await self._read_index_files(chunk), chunk[-1][0])
        return IndexScan(await self._read_index_files(wanted), last_key, end_marker, other_keys)

    async def _read_index_files(self, wanted: list[tuple[str, int, str]]) -> list[ParsedIndex]:
        """Read and parse ``wanted`` with at most ``index_read_concurrency`` reads in flight.

        A fixed set of worker coroutines shares one iterator: for thousands of small files this
        costs far less than a task per file."""
        results: list[ParsedIndex | None] = [None] * len(wanted)
        items = iter(enumerate(wanted))
        max_entries, max_bytes = self.options.max_index_entries, self._max_index_bytes
        parse = self._index_parser.parse

        async def worker() -> None:
            for i, (key, step, worker_name) in items:
                blob = await self.storage.read(key)
                index = parse(
                    blob,
                    max_entries=max_entries,
                    max_bytes=max_bytes,
                    source=f"index file {self._where(key)}",
                )
                results[i] = ParsedIndex(key, step, worker_name, index)

        with gc_paused():
            await asyncio.gather(*(worker() for _ in range(min(self._concurrency, len(wanted)))))
        return results  # type: ignore[return-value]

    def _where(self, key: str) -> str:
        return f"{self.storage.uri.rstrip('/')}/{key}"

    # ------------------------------------------------------------------ event files

    async def read_event_bytes(
        self,
        key: str,
        start: int,
        end: int,
        *,
        wait: float,
        poll_interval: float,
        complete: Callable[[], bool] | None = None,
    ) -> bytes | None:
        """Bytes ``[start, end)`` of an event file, waiting up to ``wait`` seconds for a missing
        or short file to fill. The wait ends at once when training has ended or ``complete()``
        says the trial is complete (idle scans): nothing more will be written. Then what is
        there is returned: fewer bytes than asked (``b""`` included), or None if no file."""
        deadline = time.monotonic() + wait
        while True:
            try:
                data = await self.storage.read_range(key, start, end)
            except ObjectNotFound:
                data = None
            if data is not None and len(data) >= end - start:
                return data
            if (
                (complete is not None and complete())
                or time.monotonic() >= deadline
                or await self.training_ended()
            ):
                return data
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))

    async def event_file_problem(self, key: str) -> Literal["missing", "empty", "truncated"]:
        """Why an event file did not give the bytes an index file promised."""
        try:
            first = await self.storage.read_range(key, 0, 1)
        except ObjectNotFound:
            return "missing"
        return "truncated" if first else "empty"


def _in_range(step: int, range_steps: tuple[int | None, int | None]) -> bool:
    begin, end = range_steps
    return (begin is None or begin <= step) and (end is None or step < end)
