"""Who is reading tensor values: a per-thread observer the rule framework sets.

``Rule.invoke`` runs a rule's step with ``observe_reads(callback)``; every value or reduction
the rule reads through ``Tensor`` in that thread is reported as ``callback(name, step, value)``,
after the read, with what was read: the array ``Tensor.value`` returns, a dict ``{(reduction,
abs): value}`` for reductions, or None (a histogram, a row of a batch read). That is how the
evaluator knows a rule written for smdebug (which records no comparisons) read no tensor at
all, and what the rule report charts of such a rule (without reading anything again). The
trial layer knows nothing about rules: it only calls what it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

__all__ = ["note_read", "observe_reads", "observing"]

ReadObserver = Callable[[str, int, Any], None]

_observer: ContextVar[ReadObserver | None] = ContextVar("tensor_read_observer", default=None)


class _Observing:
    """The block of ``observe_reads`` (a class, not a generator: a rule enters one at every
    step)."""

    __slots__ = ("_callback", "_token")

    def __init__(self, callback: ReadObserver) -> None:
        self._callback = callback
        self._token: Token[ReadObserver | None] | None = None

    def __enter__(self) -> None:
        self._token = _observer.set(self._callback)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _observer.reset(self._token)
            self._token = None


def observe_reads(callback: ReadObserver) -> _Observing:
    """Report every tensor read in this thread (and context) to ``callback`` while inside."""
    return _Observing(callback)


#: The current observer, or None: a hot path asks (a C call) before it notes a read.
observing: Callable[[], ReadObserver | None] = _observer.get


def note_read(name: str, step: int, value: Any = None) -> None:
    """Tell the current observer, if any, that ``name`` was read at ``step`` (``value``: what
    was read, when the caller has it at hand)."""
    callback = _observer.get()
    if callback is not None:
        callback(name, step, value)
