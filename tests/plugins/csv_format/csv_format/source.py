"""``CsvSource``: the ``Source`` of a folder of ``step,tag,value`` CSV files.

Each scan reads the files that grew since the last (a line cut short is read again next time),
adds their rows to per-tag series, and hands the trial the steps it had not seen as one
``StepBatch`` (``ScalarValues.batch``); ``ScalarValues`` answers the values.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any, cast

import numpy as np

from evaluator.engine.cache import TrialCache
from evaluator.engine.options import TrialOptions
from evaluator.engine.runner import BackgroundLoop
from evaluator.engine.scalars import WORKER, ScalarValues, Series
from evaluator.engine.view import TrialView
from evaluator.errors import ClientError
from evaluator.formats.collections_file import Collection, CollectionsFile
from evaluator.modes import ModeKeys
from evaluator.sources import IndexScan, LoadedCollections, ParsedIndex, SourceBase, StepRange
from evaluator.storage.base import ObjectInfo, Storage

__all__ = ["CsvSource"]


class CsvSource(SourceBase):
    """Reads the ``*.csv`` files of one folder through a ``Storage`` (``SourceBase`` gives the
    trial state, the end marker, optional reads and ``preview``)."""

    kind = "csv"
    storage: Storage

    def __init__(self, storage: Storage, options: TrialOptions) -> None:
        self.storage = storage
        self.options = options
        self.values = ScalarValues()
        self._offsets: dict[str, int] = {}  # key -> bytes consumed (whole lines)
        self._rows: dict[str, dict[int, float]] = {}  # tag -> step -> value
        self._scans = 0

    async def _csv_files(self) -> list[ObjectInfo]:
        pages = cast(AsyncGenerator[ObjectInfo, None], self.storage.list_after(""))
        async with contextlib.aclosing(pages) as listing:
            return [o async for o in listing if o.key.endswith(".csv")]

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections:
        """Wait until a CSV file exists. Collections: ``default`` holds every tag, ``losses``
        the tags that name a loss (what the loss rules read by default)."""
        deadline = time.monotonic() + timeout
        while not await self._csv_files():
            if await self.training_ended() or time.monotonic() >= deadline:
                raise ClientError(f"no *.csv files under {self.storage.uri} after {timeout:g} s")
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        manifest = CollectionsFile(
            {
                "default": Collection("default", include_regex=[".*"]),
                "losses": Collection("losses", include_regex=["(?i)loss"]),
            }
        )
        return LoadedCollections(manifest, {WORKER}, [])

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        grown = [o for o in await self._csv_files() if o.size > self._offsets.get(o.key, 0)]
        changed = False
        for obj in sorted(grown, key=lambda o: o.key):
            start = self._offsets.get(obj.key, 0)
            blob = await self.storage.read_range(obj.key, start, obj.size)
            whole = blob[: blob.rfind(b"\n") + 1]  # a line cut short waits for the next scan
            self._offsets[obj.key] = start + len(whole)
            changed |= self._add_rows(whole.decode(), obj.key, range_steps)
        end = with_end_marker and await self.training_ended()
        if not changed:
            return IndexScan([], None, end_marker=end)
        self._scans += 1
        batch = self.values.batch(self._series())
        last = max((s[-1] for _, _, s in batch.steps), default=0)
        return IndexScan([ParsedIndex(f"csv#{self._scans}", last, WORKER, batch)], None, end)

    def _add_rows(
        self, text: str, key: str, range_steps: tuple[int | None, int | None] | None
    ) -> bool:
        begin, end = range_steps or (None, None)
        added = False
        for line in text.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if not line.strip() or fields == ["step", "tag", "value"]:
                continue
            try:
                step, tag, value = int(fields[0]), fields[1], float(fields[2])
            except (ValueError, IndexError):
                raise ClientError(
                    f"{self.storage.uri.rstrip('/')}/{key}: row {line!r} is not step,tag,value "
                    "(a whole number, a name, a number)"
                ) from None
            if (begin is None or step >= begin) and (end is None or step < end):
                self._rows.setdefault(tag, {})[step] = value
                added = True
        return added

    def _series(self) -> Series:
        series: Series = {}
        for tag, rows in self._rows.items():
            steps = np.array(sorted(rows), np.int64)
            series[(ModeKeys.GLOBAL, tag)] = (steps, np.array([rows[s] for s in steps.tolist()]))
        return series

    async def aclose(self) -> None:
        self.values.close()
        await self.storage.aclose()

    def open_values(self, cache: TrialCache, view: TrialView, loop: BackgroundLoop) -> ScalarValues:
        return self.values.open(view)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "CSV scalars (step,tag,value rows in *.csv files)",
            "end_marker": "CSV files carry no end marker",
        }
