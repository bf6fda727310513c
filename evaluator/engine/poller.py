"""The poller: keeps a trial cache fresh from storage, on the background event loop.

One poll is one listing that starts after the listing token (the last complete step's file,
so files of incomplete steps are listed again until every worker has written them) and also
reveals the end marker; the new index files it names are fetched concurrently, parsed, and
applied to the cache, which wakes every waiting caller. While nothing changes the interval
grows from ``poll_interval`` to ``max_poll_interval`` (never below ``poll_interval``: a poll
interval longer than that stays as given); new data resets it.

A poll can also be run on demand (``poll_once``), which is what smdebug-style access-triggered
refreshes do when no background polling is running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable

from evaluator.engine.cache import TrialCache
from evaluator.engine.options import TrialOptions
from evaluator.engine.runner import BackgroundLoop
from evaluator.engine.source import ParsedIndex, Source

__all__ = ["Poller"]

log = logging.getLogger("evaluator.trial")


class Poller:
    """Scans one trial's storage and applies what is new to its cache."""

    def __init__(
        self,
        cache: TrialCache,
        source: Source,
        options: TrialOptions,
        range_steps: tuple[int | None, int | None] | None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.cache = cache
        self.source = source
        self.options = options
        self.range_steps = range_steps
        self.error: BaseException | None = None
        self._with_end_marker = True
        self._lock = asyncio.Lock()
        self._task: concurrent.futures.Future[None] | None = None
        self._sleep = sleep  # every wait between listings goes through it (tests count them)
        self._chunks_new = False  # this poll applied part of its files already

    # ---------------------------------------------------------------- one poll

    async def poll_once(self) -> bool:
        """List, fetch and apply what is new. True if new index files were found."""
        async with self._lock:  # an on-demand poll and the background loop never interleave
            return await self._poll()

    def _apply_chunk(self, files: list[ParsedIndex], last_key: str) -> None:
        """Apply part of a long listing's files at once (``Source.scan``)."""
        if self.cache.apply(files, last_key, ended=False, part=True):
            self._chunks_new = True

    async def _poll(self) -> bool:
        self._chunks_new = False
        found = await self._poll_listing()
        return found or self._chunks_new

    async def _poll_listing(self) -> bool:
        token, read = self.cache.scan_position()
        with_marker = self._with_end_marker
        scan = await self.source.scan(
            token,
            read,
            self.range_steps,
            with_end_marker=with_marker,
            apply_chunk=self._apply_chunk,
        )
        if scan.other_keys:
            # Something else lives between index/ and the marker: list index/ alone from now on.
            self._with_end_marker = False
        ended = scan.end_marker if with_marker else await self.source.training_ended()
        ended = ended or await self._stop_signalled()
        if not ended or self.cache.ended_seen:
            return self.cache.apply(scan.files, scan.last_key, ended=ended)
        # First sight of the end: files written just before the marker may have landed after
        # this listing passed their keys, so list once more (as smdebug does) before declaring
        # every step complete.
        self.cache.ended_seen = True
        new = self.cache.apply(scan.files, scan.last_key, ended=False)
        if self.options.training_end_delay:
            await self._sleep(self.options.training_end_delay)
        token, read = self.cache.scan_position()
        final = await self.source.scan(
            token, read, self.range_steps, with_end_marker=False, apply_chunk=self._apply_chunk
        )
        return self.cache.apply(final.files, final.last_key, ended=True) or new

    async def _stop_signalled(self) -> bool:
        """SageMaker's stop signal: a file holding an epoch time; stop once that time plus the
        grace period has passed. An unreadable file also means stop, as smdebug decides."""
        name = self.options.stop_signal_file
        if not name:
            return False
        data = await self.source.read_optional(name.lstrip("/"))
        if data is None:
            return False
        try:
            signalled_at = float(data.decode().strip())
        except (UnicodeDecodeError, ValueError):
            return True
        return time.time() > signalled_at + self.options.stop_grace_seconds

    # ---------------------------------------------------------------- background polling

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, loop: BackgroundLoop) -> None:
        """Poll in the background until every step is loaded or ``stop`` is called."""
        if not self.running:
            self.error = None
            self._task = loop.submit(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        interval = self.options.poll_interval
        slowest = max(interval, self.options.max_poll_interval)
        try:
            while not self.cache.state.loaded_all_steps:
                new = await self.poll_once()
                interval = self.options.poll_interval if new else min(interval * 1.5, slowest)
                if self.cache.state.loaded_all_steps:
                    break
                await self._sleep(interval)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # surfaced to waiting callers; they must not wait forever
            log.warning("polling %s failed: %s", self.cache.uri, e)
            self.error = e
            with self.cache.changed:
                self.cache.changed.notify_all()
