"""``IndexListing``: smdebug's index reader as scripts see it (``trial.index_reader``,
``smdebug.core.index_reader``): the index and event files of a trial, listed the way smdebug
lists them. Reading stays with the trial; this only lists.

smdebug spells what it lists differently per backend, and so do we: locally, paths (the trial
folder joined with the file's key) and ``list_index_files()`` a list; on S3, object keys in the
bucket and ``list_index_files()`` a ``(keys, last key)`` pair.
"""

from __future__ import annotations

import bisect
import logging
import os
import posixpath
import re
from collections.abc import Callable, Coroutine
from typing import Any

from evaluator.formats.keys import EVENTS_PREFIX, INDEX_PREFIX
from evaluator.storage.base import Storage
from evaluator.storage.schemes import is_remote, local_path, split_remote

__all__ = ["IndexListing"]

log = logging.getLogger("evaluator.trial")

_INDEX_FILE = re.compile(r"(.+)\.(json|csv)$")
_EVENT_FILE = re.compile(r"(.+)\.(tfevents)$")

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


class IndexListing:
    """Lists a trial's index and event files, as smdebug's ``LocalIndexReader`` /
    ``S3IndexReader`` do. ``run`` runs a coroutine to its end (the trial's background loop)."""

    def __init__(self, path: str, storage: Storage, run: Runner, *, retry_limit: int) -> None:
        self.path = path
        self.event_file_retry_limit = retry_limit
        self.logger = log
        self._storage = storage
        self._run = run
        self.is_s3 = is_remote(path)
        if self.is_s3:
            self.bucket_name, self.prefix_name = split_remote(path)
            self._base = self.prefix_name
        else:
            self._base = local_path(path)

    def _spelled(self, key: str) -> str:
        """A key relative to the trial, as smdebug lists it: a path, or an S3 object key."""
        if not self._base:
            return key
        return posixpath.join(self._base, key) if self.is_s3 else os.path.join(self._base, key)

    def _list(self, prefix: str, pattern: re.Pattern[str]) -> list[str]:
        async def collect() -> list[str]:
            return [
                o.key
                async for o in self._storage.list_after(prefix)
                if pattern.match(posixpath.basename(o.key))
            ]

        keys: list[str] = self._run(collect())
        return sorted(self._spelled(k) for k in keys)

    def list_index_files(self, start_after_key: str | None = None) -> Any:
        """The index files (``.json``/``.csv`` under ``index/``), sorted. Locally a list; on S3
        ``(keys after start_after_key, the last key or None)``, as smdebug returns them."""
        found = self._list(INDEX_PREFIX, _INDEX_FILE)
        if not self.is_s3:
            return found
        if start_after_key is not None:
            found = found[bisect.bisect_right(found, start_after_key) :]
        return found, (found[-1] if found else None)

    def list_event_files(self, start_after_key: str | None = None) -> list[str]:
        """The event files (``.tfevents`` under ``events/``), sorted, from ``start_after_key``
        on (locally that file itself included, as smdebug's ``bisect_left``; on S3 after it)."""
        found = self._list(EVENTS_PREFIX, _EVENT_FILE)
        if start_after_key is None:
            return found
        if self.is_s3:
            return found[bisect.bisect_right(found, start_after_key) :]
        return found[bisect.bisect_left(found, start_after_key) :]
