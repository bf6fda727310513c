"""``TrialView``: what a ``Tensor`` may use of its trial, and nothing more.

A Tensor answers from the trial's bookkeeping (``state``, read under ``lock``), asks the
trial's ``values`` (the source's ``ValueStore``) for values, and asks the trial to rescan
storage when a step it wants is not known yet (``refresh``). The Trial hands each Tensor one
view; a Tensor never reaches into the Trial itself, so the two can change independently
(smdebug's Tensor calls its Trial's methods and attributes freely).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from evaluator.engine.state import TrialState
from evaluator.modes import ModeKeys, StepState

if TYPE_CHECKING:
    from evaluator.engine.source import ValueStore

__all__ = ["TrialView"]


class TrialView:
    """One trial's state, its lock, its values, and its access-triggered refresh."""

    __slots__ = ("state", "lock", "values", "_refresh")

    def __init__(
        self, state: TrialState, lock: threading.RLock, refresh: Callable[[str], None]
    ) -> None:
        self.state = state
        self.lock = lock
        self.values: ValueStore | None = None  # the source's, set once it is opened
        self._refresh = refresh

    def refresh(self, name: str) -> None:
        """Rescan storage for news of ``name``, unless the trial does not refresh on access
        (every step loaded, refreshing switched off, or a background poller running)."""
        self._refresh(name)

    def step_state(self, step: int, mode: ModeKeys) -> StepState:
        """Whether ``step`` of ``mode`` is readable, skipped, or may still come, as known now."""
        with self.lock:
            return self.state.has_passed_step(step, mode)
