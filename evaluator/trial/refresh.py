"""``no_refresh`` / ``refresh``: switch a trial's automatic rescans off or on for a block."""

from __future__ import annotations

from contextlib import ContextDecorator
from typing import Any

__all__ = ["no_refresh", "refresh"]


def _as_list(trials: Any) -> list[Any]:
    return list(trials) if isinstance(trials, (list, tuple, set)) else [trials]


class _DynamicRefresh(ContextDecorator):
    """Sets ``dynamic_refresh`` on the trials for a block and puts back what was there (a
    class, not a generator: a rule enters one at every step). Also a decorator, as smdebug's
    generator-based one is."""

    def __init__(self, trials: Any, value: bool) -> None:
        self._trials = trials  # what ``with ... as`` gives back, as smdebug's does
        self._items = _as_list(trials)
        self._value = value
        self._before: list[bool] = []

    def _recreate_cm(self) -> _DynamicRefresh:
        return _DynamicRefresh(self._trials, self._value)  # a fresh one per decorated call

    def __enter__(self) -> Any:
        self._before = [t.dynamic_refresh for t in self._items]
        for t in self._items:
            t.dynamic_refresh = self._value
        return self._trials

    def __exit__(self, *exc: object) -> None:
        # smdebug sets the opposite value on exit; we restore what was there before.
        for t, old in zip(self._items, self._before, strict=True):
            t.dynamic_refresh = old


def no_refresh(trials: Any) -> Any:
    """Within the block, Trial and Tensor calls do not rescan storage for new steps.
    ``with no_refresh(trials) as same:`` gives back ``trials`` itself (a trial or a list)."""
    return _DynamicRefresh(trials, False)


def refresh(trials: Any) -> Any:
    """Within the block, Trial and Tensor calls rescan storage for new steps when needed.
    ``with refresh(trials) as same:`` gives back ``trials`` itself."""
    return _DynamicRefresh(trials, True)
