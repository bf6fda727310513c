"""``TrialView``: what a ``Tensor`` may use of its trial, and nothing more.

A Tensor answers from the trial's bookkeeping (``state``, read under ``lock``), reads values
through the trial's ``reader``, and asks the trial to rescan storage when a step it wants is not
known yet (``refresh``). The Trial hands each Tensor one view; a Tensor never reaches into the
Trial itself, so the two can change independently (smdebug's Tensor calls its Trial's methods
and attributes freely).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from evaluator.modes import ModeKeys, StepState
from evaluator.trial.held_values import HeldTensors
from evaluator.trial.reader import ValueReader
from evaluator.trial.state import TrialState

__all__ = ["TrialView"]


class TrialView:
    """One trial's state, its lock, its value reader, and its access-triggered refresh."""

    __slots__ = ("state", "lock", "reader", "held", "_refresh")

    def __init__(
        self,
        state: TrialState,
        lock: threading.RLock,
        reader: ValueReader,
        refresh: Callable[[str], None],
        held: HeldTensors | None = None,
    ) -> None:
        self.state = state
        self.lock = lock
        self.reader = reader
        self.held = held  # a TensorBoard trial's values, held in columns (None: smdebug's)
        self._refresh = refresh

    def refresh(self, name: str) -> None:
        """Rescan storage for news of ``name``, unless the trial does not refresh on access
        (every step loaded, refreshing switched off, or a background poller running)."""
        self._refresh(name)

    def step_state(self, step: int, mode: ModeKeys) -> StepState:
        """Whether ``step`` of ``mode`` is readable, skipped, or may still come, as known now."""
        with self.lock:
            return self.state.has_passed_step(step, mode)
