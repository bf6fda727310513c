"""Who is reading tensor values: a per-thread observer the rule framework sets.

``Rule.invoke`` runs a rule's step with ``observe_reads(callback)``; every value or reduction
the rule reads through ``Tensor`` in that thread is reported as ``callback(name, step)``. That is
how the evaluator knows a rule written for smdebug (which records no comparisons) read no
tensor at all. The trial layer knows nothing about rules: it only calls what it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["note_read", "observe_reads", "observing"]

ReadObserver = Callable[[str, int], None]

_observer: ContextVar[ReadObserver | None] = ContextVar("tensor_read_observer", default=None)


@contextmanager
def observe_reads(callback: ReadObserver) -> Iterator[None]:
    """Report every tensor read in this thread (and context) to ``callback`` while inside."""
    token = _observer.set(callback)
    try:
        yield
    finally:
        _observer.reset(token)


#: The current observer, or None: a hot path asks (a C call) before it notes a read.
observing: Callable[[], ReadObserver | None] = _observer.get


def note_read(name: str, step: int) -> None:
    """Tell the current observer, if any, that ``name`` was read at ``step``."""
    callback = _observer.get()
    if callback is not None:
        callback(name, step)
