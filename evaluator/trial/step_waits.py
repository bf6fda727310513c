"""Waiting for steps to be saved: ``StepWaits`` (a base of ``Trial``) blocks a rule until the
steps it needs are readable (``wait_for_steps``) or finds the next saved step
(``next_step``), sleeping until the background poller applies a scan and logging what it
awaits (``WaitNotice``) while training runs."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from evaluator.engine.waits import WaitNotice, end_of_data
from evaluator.errors import NoMoreData, StepUnavailable
from evaluator.modes import ModeKeys, StepState

__all__ = ["StepWaits"]


class StepWaits:
    """``Trial``'s waits for steps. A base of ``Trial`` only."""

    if TYPE_CHECKING:  # provided by Trial
        from evaluator.engine.cache import TrialCache
        from evaluator.engine.options import TrialOptions
        from evaluator.engine.poller import Poller
        from evaluator.engine.state import TrialState

        _state: TrialState
        _cache: TrialCache
        _poller: Poller
        path: str
        options: TrialOptions

        def start_polling(self) -> None: ...

    def wait_for_steps(
        self, required_steps: Iterable[int], mode: ModeKeys = ModeKeys.GLOBAL
    ) -> None:
        """Block until every step is readable. ``StepUnavailable`` for a skipped step,
        ``NoMoreData`` past the end of an ended job. Unlike smdebug, automatic refreshing stays
        as it was afterwards."""
        trial_state = self._state
        for step in required_steps:
            if mode is ModeKeys.GLOBAL and trial_state.readable_now(step):
                continue  # the common case, without the lock
            notice: WaitNotice | None = None
            while True:
                with self._cache.lock:
                    state = self._state.has_passed_step(step, mode)
                if state == StepState.AVAILABLE:
                    break
                if state == StepState.UNAVAILABLE:
                    raise self._unavailable(step, mode)
                notice = notice or self._notice(f"step {step} ({mode.name})")
                self._wait_for_news()
                notice.tick()

    def next_step(
        self, after: int | None, *, end_step: int | None = None, stop: threading.Event | None = None
    ) -> int | None:
        """The first saved global step after ``after`` (from the first step when None) that is
        readable, waiting for it while training runs. None when the data ends before one comes
        (training ended, or ``end_step``, exclusive, is reached) or when ``stop`` is set.

        This is how the evaluator visits saved steps directly, instead of trying every integer
        as smdebug's ``invoke_rule`` does."""
        awaited = "the first step" if after is None else f"a step after {after}"
        notice: WaitNotice | None = None
        while stop is None or not stop.is_set():
            if notice is not None:
                notice.tick()
            with self._cache.lock:
                steps = self._state.all_steps(ModeKeys.GLOBAL)
                i = 0 if after is None else bisect.bisect_right(steps, after)
                candidate = steps[i] if i < len(steps) else None
                if candidate is not None and end_step is not None and candidate >= end_step:
                    return None
                if candidate is not None:
                    if self._state.readable_now(candidate):
                        return candidate
                    state = self._state.has_passed_step(candidate, ModeKeys.GLOBAL)
                    if state != StepState.NOT_YET_AVAILABLE:
                        return candidate
                elif self._state.loaded_all_steps:
                    return None
            notice = notice or self._notice(awaited)
            # With a stop event, wake often enough to end within a second of it (well inside
            # the 4 s a stop gives the rules; more often costs CPU in every idle run).
            self._wait_for_news(1.0 if stop is not None else None)
        return None

    def _notice(self, awaited: str) -> WaitNotice:
        options = self.options
        ends, change = end_of_data(options.idle_scans_to_complete, options.stop_signal_file)
        return WaitNotice(
            awaited,
            self.path,
            interval=options.wait_log_interval,
            ends_when=ends,
            to_change=change,
        )

    def _wait_for_news(self, timeout: float | None = None) -> None:
        """Sleep until the background poller applies a scan (starting it if needed)."""
        self.start_polling()
        if self._poller.error is not None:
            raise self._poller.error
        self._cache.wait_for_change(timeout or self.options.max_poll_interval + 1)
        if self._poller.error is not None:
            raise self._poller.error

    def _unavailable(self, step: int, mode: ModeKeys) -> Exception:
        if not self._state.loaded_all_steps:
            return StepUnavailable(step, mode)
        with self._cache.lock:
            every = self._state.steps(mode, show_incomplete_steps=True)
        last = every[-1] if every else -1
        return StepUnavailable(step, mode) if step < last else NoMoreData(step, mode, last)
