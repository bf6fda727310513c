"""Waiting for steps to be saved: ``StepWaits`` (a base of ``Trial``) blocks a rule until the
steps it needs are readable (``wait_for_steps``) or finds the next saved step
(``next_step``), sleeping until the background poller applies something new (or the run's
``StopEvent`` is set) and logging what it awaits (``WaitNotice``) while training runs. A
waiting rule wakes for nothing else: only to say it still waits, every ``wait_log_interval``."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from evaluator.engine.stop import woken_by
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
                with self._cache.lock:  # checked and waited for under one hold of the lock
                    state = self._state.has_passed_step(step, mode)
                    if state == StepState.AVAILABLE:
                        break
                    if state == StepState.UNAVAILABLE:
                        raise self._unavailable(step, mode)
                    notice = notice or self._notice(f"step {step} ({mode.name})")
                    self._wait(notice.due_in())
                notice.tick()

    def next_step(
        self, after: int | None, *, end_step: int | None = None, stop: threading.Event | None = None
    ) -> int | None:
        """The first saved global step after ``after`` (from the first step when None) that is
        readable, waiting for it while training runs. None when the data ends before one comes
        (training ended, or ``end_step``, exclusive, is reached) or when ``stop`` is set.

        This is how the evaluator visits saved steps directly, instead of trying every integer
        as smdebug's ``invoke_rule`` does. A ``StopEvent`` ends the wait as it is set; a plain
        ``threading.Event`` is looked at every second."""
        with self._cache.lock:  # the common case: the step is there, nothing to wait for
            if stop is not None and stop.is_set():
                return None
            found, candidate = self._next_candidate(after, end_step)
            if found:
                return candidate
        return self._wait_for_next(after, end_step, stop)

    def _wait_for_next(
        self, after: int | None, end_step: int | None, stop: threading.Event | None
    ) -> int | None:
        """``next_step``'s wait, the stop heard as it is set (a ``StopEvent``)."""
        awaited = "the first step" if after is None else f"a step after {after}"
        notice: WaitNotice | None = None
        with woken_by(stop, self._cache.changed) as heard:
            while True:
                if notice is not None:
                    notice.tick()
                with self._cache.lock:  # checked and waited for under one hold of the lock
                    if stop is not None and stop.is_set():
                        return None
                    found, candidate = self._next_candidate(after, end_step)
                    if found:
                        return candidate
                    notice = notice or self._notice(awaited)
                    timeout = notice.due_in()
                    self._wait(timeout if heard or stop is None else min(timeout, 1.0))

    def _next_candidate(self, after: int | None, end_step: int | None) -> tuple[bool, int | None]:
        """(whether ``next_step`` is answered, its answer): the step after ``after`` when it
        is readable or decided, None when the data ends first. Under the trial's lock."""
        steps = self._state.all_steps(ModeKeys.GLOBAL)
        i = 0 if after is None else bisect.bisect_right(steps, after)
        candidate = steps[i] if i < len(steps) else None
        if candidate is not None and end_step is not None and candidate >= end_step:
            return True, None
        if candidate is not None:
            if self._state.readable_now(candidate):
                return True, candidate
            state = self._state.has_passed_step(candidate, ModeKeys.GLOBAL)
            return state != StepState.NOT_YET_AVAILABLE, candidate
        return self._state.loaded_all_steps, None

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

    def _wait(self, timeout: float) -> None:
        """Sleep on the trial's condition (under its lock) until the background poller, which
        this starts if needed, applies something new, or ``timeout``; its failure is raised."""
        self.start_polling()
        if self._poller.error is not None:
            raise self._poller.error
        self._cache.wait_for_change(timeout)
        if self._poller.error is not None:
            raise self._poller.error

    def _unavailable(self, step: int, mode: ModeKeys) -> Exception:
        if not self._state.loaded_all_steps:
            return StepUnavailable(step, mode)
        with self._cache.lock:
            every = self._state.steps(mode, show_incomplete_steps=True)
        last = every[-1] if every else -1
        return StepUnavailable(step, mode) if step < last else NoMoreData(step, mode, last)
