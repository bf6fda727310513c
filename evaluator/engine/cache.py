"""The trial cache: the single owner of what is known about one trial.

It holds the bookkeeping (``TrialState``: steps, modes, workers, tensor locations), the
index files already read, and the byte-bounded caches of event-file bytes and decoded values.
Two threads use it: the poller (on the background loop) applies new index files; the Trial
facade (the rule's thread) reads. Every change happens under ``lock`` and is announced on
``changed`` (a scan that found nothing announces nothing), so a caller waiting for a step
sleeps on a condition, not in a polling loop, and an idle trial wakes none of its waiters.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable

from evaluator.engine.gcpause import gc_paused
from evaluator.engine.lru import SharedBytes, ValueCache, shared_bytes
from evaluator.engine.options import TrialOptions
from evaluator.engine.problems import DataProblems
from evaluator.engine.source import ParsedIndex
from evaluator.engine.state import TrialState

__all__ = ["LOCAL_RAW_CACHE_MB", "TrialCache"]

log = logging.getLogger("evaluator.trial")

MiB = 1024 * 1024
# A local folder's event files are read again from the operating system's page cache for
# about what a copy of the bytes costs: its byte cache holds a working set (the files a rule
# reads a few steps back), not the trial.
LOCAL_RAW_CACHE_MB = 16.0
_generations = itertools.count()


class TrialCache:
    """State, read-set and caches of one trial, safe to share between the poller and readers."""

    def __init__(
        self, state: TrialState, options: TrialOptions, *, uri: str, local: bool = False
    ) -> None:
        self.state = state
        self.options = options
        self.uri = uri
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.values = ValueCache(int(options.value_cache_mb * MiB))
        self.reductions = ValueCache(4 * MiB)  # computed reductions: 0-d arrays, a few bytes each
        # Event-file bytes: one budget for every trial of the process (see SharedBytes).
        raw_mb = min(options.raw_cache_mb, LOCAL_RAW_CACHE_MB) if local else options.raw_cache_mb
        self.raw = SharedBytes(
            shared_bytes(int(raw_mb * MiB)), f"{uri}#{next(_generations)}"
        )  # a reopened path starts afresh
        self.read_keys: set[str] = set()
        self.problems = DataProblems()  # event files that could not give their records
        self.ended_seen = False  # the end marker (or stop signal) has been seen by a scan
        self._idle_scans = 0
        self._last_idle_at = 0.0
        # called once idle scans end the trial (a source's last look at what it left unread)
        self.at_idle_end: list[Callable[[], None]] = []

    # ---------------------------------------------------------------- the poller's side

    def scan_position(self) -> tuple[str | None, frozenset[str]]:
        """Where the next listing starts, and which keys are already read."""
        with self.lock:
            return self.state.last_index_token, frozenset(self.read_keys)

    def apply(
        self,
        files: Iterable[ParsedIndex],
        last_key: str | None,
        *,
        ended: bool,
        part: bool = False,
    ) -> bool:
        """Record one scan's new index files; True if anything new was learned.

        ``ended`` says the end marker was seen *before* this scan's listing began, so every
        file written before it has now been read: all steps count as complete. ``part``: the
        files are a first part of the scan's (a long listing is applied in parts); the
        listing token moves, and idle scans are counted, only with the scan's last part.
        """
        with self.changed:
            new = 0
            with gc_paused():
                for parsed in files:
                    if parsed.key in self.read_keys:
                        continue  # a concurrent scan applied it first
                    self.state.apply_news(parsed.step, parsed.worker, parsed.index)
                    self.read_keys.add(parsed.key)
                    new += 1
            if part:
                if new:
                    self.changed.notify_all()  # waiters see the first steps early
                return new > 0
            complete = self.state.loaded_all_steps
            self.state.update_index_token(last_key or self.state.last_index_token)
            self._forget_read_keys_below_token()
            if ended and not self.state.loaded_all_steps:
                self.state.mark_all_loaded()
            self._note_idle(new)
            if new or self.state.loaded_all_steps != complete:
                self.changed.notify_all()  # an idle scan wakes nobody: nothing changed
            return new > 0

    def _forget_read_keys_below_token(self) -> None:
        token = self.state.last_index_token
        if len(self.read_keys) > 1000 and token:
            # Listing is strictly after the token, so keys at or below it never come back.
            self.read_keys = {k for k in self.read_keys if k > token}

    def _note_idle(self, new: int) -> None:
        """Count scans that found nothing, at least one poll interval apart; after
        ``idle_scans_to_complete`` of them, treat the trial as complete (local folders that
        were copied after training and have no end marker)."""
        limit = self.options.idle_scans_to_complete
        if new or limit is None or self.state.loaded_all_steps:
            self._idle_scans = 0
            return
        now = time.monotonic()
        if self._idle_scans and now - self._last_idle_at < self.options.poll_interval:
            return
        self._idle_scans += 1
        self._last_idle_at = now
        if self._idle_scans > limit:
            log.info(
                "no new index files in %d scans: treating %s as complete (no end marker)",
                limit,
                self.uri,
            )
            for hook in self.at_idle_end:  # before any waiter sees the trial complete
                hook()
            self.state.mark_all_loaded()

    # ---------------------------------------------------------------- the readers' side

    def wait_for_change(self, timeout: float | None) -> None:
        """Sleep until a scan applies something new (new steps, the trial complete, a failed
        poll) or ``changed`` is notified otherwise (a stop), at most ``timeout`` seconds (None:
        no limit). A caller that checked the state first holds ``lock`` across both, so no
        change slips in between."""
        with self.changed:
            self.changed.wait(timeout)

    def clear(self) -> None:
        self.values.clear()
        self.reductions.clear()
        self.raw.clear()
