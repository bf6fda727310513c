"""The diagnosis of a loss-progress firing (LossNotDecreasing, Overtraining, Overfit): the loss's
history read from the trial, classified by ``evaluator.rules.diagnosis``, and the
``ignore_converged`` parameter that turns a converged firing into a note.

The history of a loss in one mode is read from the trial when a firing needs it, and only the
values saved since the previous diagnosis are read then, so a rule that fires often reads each
value once. It keeps at most ``MAX_POINTS`` values: past that, every other one is dropped and
only every other new one kept (the noise of single values is kept; the time resolution
halves). While a run keeps firing (every step, with ``ignore_converged`` or
``continue_after_fire``), a diagnosis is reused until the run has moved on by
``REDIAGNOSE_FRACTION`` of its length in global steps (nothing is read meanwhile).

A validation loss is read beside its training loss: the same tensor in TRAIN mode for an EVAL
series, ``X`` for Keras' ``val_X``, ``train-X`` for XGBoost's ``validation-X``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import CONVERGED, NOT_LEARNING, Diagnosis, classify, measure
from evaluator.rules.kit.modes import (
    VALIDATION_PREFIX,
    as_training,
    epoch_end_pair,
    is_epoch_end_log,
    value_in_mode,
)
from evaluator.rules.kit.params import Param, parse_bool

__all__ = ["IGNORE_CONVERGED", "NOISE_AWARE", "LossProgress", "too_few_values"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
MAX_POINTS = 4096
REDIAGNOSE_FRACTION = 0.02
MAX_SEEN = 8192  # values held for the next history read (then read from the trial)

NOISE_AWARE = Param(
    "noise_aware",
    "True",
    "bool",
    "Measure each loss series' noise and grow a window that holds too few logged values to "
    "tell a trend from it (docs/rules.md, 'Sparse and noisy logs'); false reads the step "
    "counts as AWS documents them.",
)

IGNORE_CONVERGED = Param(
    "ignore_converged",
    "False",
    "bool",
    "Keep a firing whose diagnosis is 'converged' as a note (logged, in the result file) "
    "instead of an issue, and go on checking; for CI gates.",
)

# "validation-logloss" <-> "train-logloss", "eval_loss" <-> "train_loss"
_VALIDATION = re.compile(r"(?i)(?<![a-z])(validation|valid|val|eval|test)(?![a-z])")
_TRAINING = re.compile(r"(?i)(?<![a-z])(training|train)(?![a-z])")


@dataclass
class _History:
    steps: list[int] = field(default_factory=list)  # global steps
    values: list[float] = field(default_factory=list)
    read_to: int = -1  # the last global step read
    stride: int = 1
    seen: int = 0
    first_read: int | None = None  # the first global step read
    cached: Diagnosis | None = None

    def add(self, mode_step: int, value: float) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.steps.append(mode_step)
        self.values.append(value)
        if len(self.steps) > MAX_POINTS:
            self.steps, self.values = self.steps[::2], self.values[::2]
            self.stride *= 2


class LossProgress:
    """One rule's loss histories and diagnoses."""

    def __init__(self, rule_name: str, ignore_converged: str | bool) -> None:
        self.ignore_converged = parse_bool(rule_name, "ignore_converged", ignore_converged)
        self._histories: dict[tuple[str, ModeKeys], _History] = {}
        self._counterparts: dict[tuple[str, ModeKeys], tuple[str, ModeKeys] | None] = {}
        self._seen: dict[tuple[str, int], float] = {}  # values the rule read, not yet taken

    def saw(self, name: str, step: int, value: float) -> None:
        """The rule read ``value`` of ``name`` at global ``step`` as a value of the step's
        mode (what ``value_in_mode`` gives): a later history read takes it from here instead
        of reading it again. Bounded: past ``MAX_SEEN`` values, forgotten (then read)."""
        if len(self._seen) >= MAX_SEEN:
            self._seen.clear()
        self._seen[(name, step)] = value

    def diagnose(self, trial: Any, name: str, mode: ModeKeys, step: int) -> Diagnosis:
        """The diagnosis of the loss ``name`` followed in ``mode`` (TRAIN or EVAL; GLOBAL
        counts as TRAIN) at global ``step``, with ``note`` set when it is converged and
        ``ignore_converged`` is on."""
        mode = as_training(mode) or TRAIN
        history = self._histories.setdefault((name, mode), _History())
        if history.cached is not None and history.first_read is not None:
            # Reused while the run moved on by less than REDIAGNOSE_FRACTION of its length:
            # a rule that fires at every step reads and classifies its loss ~50 times per
            # doubling of the run, not at every step.
            if step - history.read_to <= REDIAGNOSE_FRACTION * (
                history.read_to - history.first_read
            ):
                return history.cached
        self._read(trial, name, mode, step)
        key = (name, mode)
        if key not in self._counterparts:
            self._counterparts[key] = _counterpart(trial, name, mode)
        other = self._counterparts[key]
        beside = None
        if other is not None:
            found = self._read(trial, other[0], other[1], step)
            beside = measure(found.steps, found.values)
        trend = measure(history.steps, history.values)
        unit = "steps"
        if trend is None:
            diagnosis = Diagnosis(NOT_LEARNING, "the loss has no saved value yet", {})
        elif other is not None and _is_validation(name, mode):
            diagnosis = classify(trend, training=beside, unit=unit)
        else:
            diagnosis = classify(trend, validation=beside, unit=unit)
        if diagnosis.kind == CONVERGED and self.ignore_converged:
            diagnosis = replace(
                diagnosis, note=True, words=diagnosis.words + " (a note: ignore_converged is set)"
            )
        history.cached = diagnosis
        return diagnosis

    def _read(self, trial: Any, name: str, mode: ModeKeys, step: int) -> _History:
        history = self._histories.setdefault((name, mode), _History())
        if step <= history.read_to or not trial.has_tensor(name):
            return history
        saved = trial.tensor(name).steps()
        for g in saved[bisect.bisect_right(saved, history.read_to) :]:
            if g > step:
                break
            raw_mode = trial.mode(g)
            epoch_end = raw_mode == EVAL and is_epoch_end_log(trial, name, g)
            if (as_training(raw_mode) != mode or epoch_end) and not (epoch_end and mode == TRAIN):
                continue  # another mode's value (an epoch-end log is a training value)
            value = self._seen.pop((name, g), None)
            if value is None:
                value = _value(trial, name, g, epoch_end)
            if value is not None:
                history.add(g, value)
                history.first_read = g if history.first_read is None else history.first_read
        history.read_to = step
        return history


def _value(trial: Any, name: str, step: int, epoch_end: bool) -> float | None:
    """``name`` at global ``step`` as a value of its series: at a Keras epoch-end log the
    training epoch mean (the one training value a hook saving every few hundred steps is
    sure to have saved), else the step's own value (``value_in_mode``)."""
    if epoch_end:
        pair = epoch_end_pair(trial, name, step)
        return None if pair is None else pair[0]
    mode = as_training(trial.mode(step)) or TRAIN
    return value_in_mode(trial, name, step, mode, not_scalar=set())


def _is_validation(name: str, mode: ModeKeys) -> bool:
    return mode == EVAL or name.startswith(VALIDATION_PREFIX) or bool(_VALIDATION.search(name))


def _counterpart(trial: Any, name: str, mode: ModeKeys) -> tuple[str, ModeKeys] | None:
    """The training loss beside a validation loss, or the validation loss beside a training
    loss (the same tensor in the other mode, Keras' ``X`` / ``val_X``, XGBoost's
    ``train-X`` / ``validation-X``); None when none is saved."""
    candidates: list[tuple[str, ModeKeys]] = []
    if _is_validation(name, mode):
        if mode == EVAL:
            candidates.append((name, TRAIN))
        if name.startswith(VALIDATION_PREFIX):
            candidates.append((name[len(VALIDATION_PREFIX) :], TRAIN))
        renamed = _swap(_VALIDATION, name, "train")
        candidates += [(renamed, TRAIN)] if renamed != name else []
    else:
        candidates += [(name, EVAL), (VALIDATION_PREFIX + name, EVAL)]
        for word in ("validation", "valid", "val", "eval", "test"):
            renamed = _swap(_TRAINING, name, word)
            if renamed != name:
                candidates += [(renamed, TRAIN), (renamed, EVAL)]
    if _is_validation(name, mode) and name != "loss":
        candidates.append(("loss", TRAIN))  # Hugging Face's eval/<set>_loss beside train/loss
    for candidate, wanted in candidates:
        if trial.has_tensor(candidate) and _has_values(trial, candidate, wanted):
            return candidate, wanted
    return None


def _swap(pattern: re.Pattern[str], name: str, word: str) -> str:
    """``name`` with the words ``pattern`` finds replaced by ``word`` (upper case for upper)."""
    return pattern.sub(lambda m: word.upper() if m.group(1).isupper() else word, name)


def _has_values(trial: Any, name: str, mode: ModeKeys) -> bool:
    for g in trial.tensor(name).steps():
        if as_training(trial.mode(g)) == mode and value_in_mode(trial, name, g, mode) is not None:
            return True
    return False


def too_few_values(short: list[tuple[str, str, int, int, float]], what: str) -> str | None:
    """Why a rule whose data ended before any comparison could not judge: ``short`` holds,
    per loss and mode, (tensor, mode, logged values read, values a comparison needs, noise in
    % of the loss's scale); None when it is empty."""
    if not short:
        return None
    parts = [
        f"{name} ({mode}) has {count} logged value{'s' if count != 1 else ''}; {what} "
        f"{needed // 2} logged values each ({needed} in all) are needed to tell a trend from "
        f"its noise ({noise:.2g}% of its scale)"
        for name, mode, count, needed, noise in short
    ]
    return (
        "; ".join(parts) + ": too few logged values; log the loss more often or train longer, "
        "or set noise_aware=false to compare the values as AWS documents"
    )
