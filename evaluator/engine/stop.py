"""``StopEvent``: one run's stop, which wakes the waits it is handed to as it is set, so no
wait (a rule's for the next step, the evaluation's for its rules) looks at it on a timer.
Standard library only: the evaluation process creates its stop before anything else loads."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["StopEvent", "woken_by"]


class StopEvent(threading.Event):
    """A ``threading.Event`` for one run's stop that also calls what listens when it is set
    (each wait for data notifies its condition), so a waiting rule ends as soon as the run is
    stopped instead of looking at the stop on a timer. One per run, never shared by the
    process: a process serving many runs gives each its own. ``set`` may run in a signal
    handler: a listener only notifies a condition whose lock is reentrant."""

    def __init__(self) -> None:
        super().__init__()
        self._listeners: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()
        self._guard = threading.RLock()

    def set(self) -> None:
        super().set()
        with self._guard:
            listeners = list(self._listeners.values())
        for listener in listeners:
            listener()

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` when the stop is set (at once when it is already); returns what
        removes it again."""
        with self._guard:
            key = next(self._keys)
            self._listeners[key] = listener
        if self.is_set():
            listener()
        return lambda: self._remove(key)

    def _remove(self, key: int) -> None:
        with self._guard:
            self._listeners.pop(key, None)


@contextmanager
def woken_by(stop: threading.Event | None, condition: threading.Condition) -> Iterator[bool]:
    """While inside, setting ``stop`` notifies every waiter on ``condition``. Yields whether
    it does: a ``StopEvent`` does; a plain ``threading.Event`` (or None) cannot be heard, so
    a waiter that has one must look at it on a timer."""
    if not isinstance(stop, StopEvent):
        yield False
        return

    def wake() -> None:
        with condition:
            condition.notify_all()

    remove = stop.listen(wake)
    try:
        yield True
    finally:
        remove()
