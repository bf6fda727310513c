"""``no_refresh`` / ``refresh``: switch a trial's automatic rescans off or on for a block."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["no_refresh", "refresh"]


def _as_list(trials: Any) -> list[Any]:
    return list(trials) if isinstance(trials, (list, tuple, set)) else [trials]


@contextmanager
def _dynamic_refresh(trials: Any, value: bool) -> Iterator[None]:
    items = _as_list(trials)
    before = [t.dynamic_refresh for t in items]
    for t in items:
        t.dynamic_refresh = value
    try:
        yield
    finally:
        # smdebug sets the opposite value on exit; we restore what was there before.
        for t, old in zip(items, before, strict=True):
            t.dynamic_refresh = old


def no_refresh(trials: Any) -> Any:
    """Within the block, Trial and Tensor calls do not rescan storage for new steps."""
    return _dynamic_refresh(trials, False)


def refresh(trials: Any) -> Any:
    """Within the block, Trial and Tensor calls rescan storage for new steps when needed."""
    return _dynamic_refresh(trials, True)
