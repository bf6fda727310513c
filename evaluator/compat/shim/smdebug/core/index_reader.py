"""smdebug.core.index_reader: ``LocalIndexReader`` / ``S3IndexReader`` for listing a trial's
index and event files (``list_index_files``, ``list_event_files``), standalone or as
``trial.index_reader``. Values are read through the trial (``trial.tensor(...).value``)."""

from __future__ import annotations

import os
from typing import Any

from evaluator.engine.runner import get_loop
from evaluator.sources.smdebug.index_listing import IndexListing
from evaluator.storage import open_storage

from .config_constants import MISSING_EVENT_FILE_RETRY_LIMIT, MISSING_EVENT_FILE_RETRY_LIMIT_KEY

__all__ = ["IndexReader", "LocalIndexReader", "S3IndexReader"]

IndexReader = IndexListing


def _listing(path: str) -> IndexListing:
    retries = int(os.getenv(MISSING_EVENT_FILE_RETRY_LIMIT_KEY, MISSING_EVENT_FILE_RETRY_LIMIT))
    return IndexListing(path, open_storage(path), get_loop().run, retry_limit=retries)


def LocalIndexReader(path: str) -> Any:  # noqa: N802 - smdebug's class name
    """The index reader of a local trial folder."""
    return _listing(path)


def S3IndexReader(path: str) -> Any:  # noqa: N802 - smdebug's class name
    """The index reader of an ``s3://bucket/prefix`` trial."""
    return _listing(path)
