"""Keras' batch-level loss is a running mean since the epoch start: the batch means behind it.

smdebug's ``KerasHook`` saves, at a TRAIN step, the ``loss`` of Keras' batch logs: the mean of
the losses of the epoch's batches so far (Keras resets its metrics at every epoch start), and
at an EVAL step the mean over the validation pass's batches so far (docs/hook-naming.md). Such a
series falls at every epoch start whatever the model does (the mean restarts from the first,
highest, batches), so comparing a saved value with one from an earlier epoch compares unlike
quantities. With the position ``k`` (0-based) of each saved step in its epoch (pass), the mean
of the batch losses between two saved steps of one epoch is exact:

    mean(batches p+1 .. s) = ((k_s + 1) * r_s - (k_p + 1) * r_p) / (k_s - k_p)

and the first saved step of an epoch holds the mean of its batches 0 .. k_s. ``RunningMeans``
gives these batch means, the quantity a PyTorch or GradientTape loss holds per step.

Which trials: a loss saved with Keras' epoch-end logs (``kit.modes.is_epoch_end_log``: ``X``
beside ``val_X`` at an EVAL step, what ``KerasHook`` writes for ``fit(validation_data=...)``),
or a trial saving Keras' ``batch`` log (the batch index in the epoch) at TRAIN steps. Any other
loss (PyTorch, GradientTape, XGBoost, TensorBoard) is read as saved.

Where the epochs start: every step counts in one global counter, so at a saved step with
global step ``g`` and mode step ``m``, ``g - m`` steps of the other modes ran before it. At a
saved EVAL step that is the number of TRAIN steps before its validation pass, i.e. the TRAIN
mode step at which the next epoch starts; at a saved TRAIN step, the EVAL mode step at which
the next validation pass starts. Keras saves every epoch's end (the epoch-end log, the last
step of the validation pass), so every epoch boundary is known once the epoch's validation
has run, and a validation pass starts after it even where no TRAIN step was saved between.
Without validation, ``batch`` at a TRAIN step ``m`` says the epoch started at ``m - batch``;
Keras' epochs have one length, so an epoch whose ``batch`` was not saved starts at a multiple
of the known starts' greatest common distance. A batch mean of the other sign than the saved
means (impossible for batches of one sign) says the epochs were not as read: the saved value
is kept.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import VALIDATION_PREFIX, is_epoch_end_log
from evaluator.rules.kit.selection import scalar

__all__ = ["BATCH_LOG", "RunningMeans"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
BATCH_LOG = "batch"  # Keras' batch-index log, saved by KerasHook as a metric


class RunningMeans:
    """The batch means behind Keras running-mean losses of one trial (see the module)."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._keras: dict[str, tuple[bool, int]] = {}  # name -> (answer, EVAL steps seen)
        # per mode: the mode steps where an epoch (validation pass) starts, sorted
        self._starts: dict[ModeKeys, list[int]] = {TRAIN: [0], EVAL: [0]}
        self._seen: dict[ModeKeys, int] = {TRAIN: 0, EVAL: 0}  # steps of each mode read
        self._batch_seen = 0
        self._raw: dict[tuple[str, int], float | None] = {}

    def applies(self, name: str, mode: ModeKeys) -> bool:
        """Whether the TRAIN / EVAL values of ``name`` are Keras running means."""
        if mode not in (TRAIN, EVAL):
            return False
        evals = self.trial.steps(mode=EVAL)
        found = self._keras.get(name)
        if found is None or (not found[0] and found[1] != len(evals)):  # a live trial grows
            new = evals[found[1] :] if found else evals
            found = self._keras[name] = (self._is_keras(name, new), len(evals))
        return found[0]

    def batch_mean(self, name: str, mode: ModeKeys, mode_step: int, step: int) -> float | None:
        """The mean of the batch losses since the previous saved value of ``name`` in the same
        epoch (or since the epoch start) at global ``step``; None when not readable."""
        self._refresh(step)
        now = self._read(name, step)
        if now is None or not math.isfinite(now):
            return now
        start = self._start(mode, mode_step)
        earlier = self._previous(name, mode, mode_step, start)
        if earlier is None:
            return now
        p_mode, p_step = earlier
        before = self._read(name, p_step)
        if before is None:
            return now
        k_now, k_before = mode_step - start, p_mode - start
        found = ((k_now + 1) * now - (k_before + 1) * before) / (k_now - k_before)
        # Batch losses of one sign cannot average to the other: the epochs were not as read.
        return now if found * now < 0 and before * now > 0 else found

    def convert(
        self, name: str, mode: ModeKeys, saved: Iterable[tuple[int, int]], values: dict[int, Any]
    ) -> None:
        """Turn the saved values already read (``values``, global step -> value, of the saved
        (mode step, global step) pairs ``saved``) into batch means: a live trial may show
        that a loss is Keras' running mean only after some of its values were read."""
        for mode_step, step in saved:
            if values.get(step) is not None:
                found = self.batch_mean(name, mode, mode_step, step)
                values[step] = values[step] if found is None else found

    def position(self, mode: ModeKeys, mode_step: int, step: int) -> int:
        """The 0-based position of ``mode_step`` in its epoch (validation pass)."""
        self._refresh(step)
        return mode_step - self._start(mode, mode_step)

    # ------------------------------------------------------------------ internals

    def _is_keras(self, name: str, evals: list[int]) -> bool:
        """Keras' epoch-end log of ``name`` at one of the EVAL steps ``evals``, or Keras'
        ``batch`` log saved at TRAIN steps."""
        trial = self.trial
        for s in evals:
            g = trial.global_step(EVAL, s)
            if g is not None and is_epoch_end_log(trial, name, g):
                return True
        return BATCH_LOG in trial.tensor_names() and bool(trial.steps(mode=TRAIN))

    def _start(self, mode: ModeKeys, mode_step: int) -> int:
        starts = self._starts[mode]
        return starts[bisect.bisect_right(starts, mode_step) - 1]

    def _refresh(self, step: int) -> None:
        """Epoch starts from the steps saved so far (each mode's new steps read once)."""
        trial = self.trial
        for mode, other in ((EVAL, TRAIN), (TRAIN, EVAL)):
            steps = trial.steps(mode=mode)
            for s in steps[self._seen[mode] :]:
                g = trial.global_step(mode, s)
                if g is None:
                    continue
                if g - s > 0:
                    self._add(other, g - s)
                if mode == EVAL and _epoch_end(trial, g):  # the pass's last step
                    self._add(EVAL, s + 1)
            self._seen[mode] = len(steps)
        if trial.steps(mode=EVAL) or BATCH_LOG not in trial.tensor_names():
            return
        batch = trial.tensor(BATCH_LOG)
        steps = batch.steps(mode=TRAIN)
        for s in steps[self._batch_seen :]:
            try:
                index = scalar(batch.value(s, mode=TRAIN))
            except TensorUnavailableForStep:
                continue
            if index is not None and math.isfinite(index) and 0 <= index <= s:
                self._add(TRAIN, s - int(index))
        self._batch_seen = len(steps)
        self._regular(TRAIN)

    def _regular(self, mode: ModeKeys) -> None:
        """Keras epochs have one length: the starts known are multiples of their greatest
        common distance apart, so an epoch whose ``batch`` log was not saved still starts."""
        starts = self._starts[mode]
        length = 0
        for a, b in zip(starts, starts[1:]):
            length = math.gcd(length, b - a)
        if length > 0:
            for start in range(starts[0] + length, starts[-1], length):
                self._add(mode, start)

    def _add(self, mode: ModeKeys, start: int) -> None:
        starts = self._starts[mode]
        i = bisect.bisect_left(starts, start)
        if i == len(starts) or starts[i] != start:
            starts.insert(i, start)

    def _previous(
        self, name: str, mode: ModeKeys, mode_step: int, start: int
    ) -> tuple[int, int] | None:
        """(mode step, global step) of the newest saved value of ``name`` before
        ``mode_step`` in the same epoch (an epoch-end log is not a value of the mode)."""
        trial = self.trial
        steps = trial.tensor(name).steps(mode=mode)
        for s in reversed(steps[: bisect.bisect_left(steps, mode_step)]):
            if s < start:
                return None
            g = trial.global_step(mode, s)
            if g is None or (mode == EVAL and is_epoch_end_log(trial, name, g)):
                continue
            return s, g
        return None

    def _read(self, name: str, step: int) -> float | None:
        key = (name, step)
        if key not in self._raw:
            try:
                self._raw[key] = scalar(self.trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                self._raw[key] = None
            if len(self._raw) > 4096:  # the newest values are the ones asked again
                self._raw.pop(next(iter(self._raw)))
        return self._raw[key]


def _epoch_end(trial: Any, step: int) -> bool:
    """Whether global ``step`` holds Keras' epoch-end logs (``X`` beside ``val_X``)."""
    names = set(trial.tensor_names(step=step))
    return any(VALIDATION_PREFIX + n in names for n in names if not n.startswith(VALIDATION_PREFIX))
