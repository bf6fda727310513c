"""Overtraining: training or validation loss that has stopped improving."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import (
    VALIDATION_PREFIX,
    as_training,
    epoch_end_pair,
    is_epoch_end_log,
    value_in_mode,
)
from evaluator.rules.kit.params import Param, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from rules_builtin._progress import IGNORE_CONVERGED, LossProgress
from rules_builtin.registry import register

__all__ = ["Overtraining"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

# Which loss a mode's value is: GLOBAL (a hook that never set modes) counts as training.
_ROLE = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "validation"}
_PARAMETER = {"train": "patience_train", "validation": "patience_validation"}


@dataclass
class _Best:
    """One loss in one role: its last ``size`` values, the best (lowest) moving mean of them,
    and how many values since that best."""

    size: int = 1
    window: deque[float] = field(default_factory=deque)
    value: float | None = None
    since: int = 0
    mean: float = math.nan  # the latest moving mean

    def observe(self, value: float, delta: float) -> bool:
        """Take ``value``; whether its moving mean was compared with an earlier best."""
        self.window.append(value)
        while len(self.window) > self.size:
            self.window.popleft()
        if len(self.window) < self.size:
            return False  # the window is still filling
        self.mean = mean = math.fsum(self.window) / len(self.window)
        if self.value is None:
            if math.isnan(mean):  # NaN from the first values on: no improvement, counted
                self.since += 1
                return True
            self.value, self.since = mean, 0
            return False
        if mean < self.value - delta * abs(self.value):
            self.value, self.since = mean, 0
        else:
            self.since += 1
        return True


@dataclass
class _Loss:
    roles: dict[str, _Best]
    epoch_logs: bool = False  # a Keras epoch-end log of this loss has been seen


@register
class Overtraining(Rule):
    """Fires at a step where the moving mean of a loss of the ``losses`` collection has gone
    ``patience_train`` (default 5) saved TRAIN values, or ``patience_validation`` (default 10)
    saved EVAL values, without a new best.

    Moving mean: at each saved value, the mean of the last ``ceil(patience / 2)`` saved values
    of that mode (``patience_train`` for TRAIN, ``patience_validation`` for EVAL: 3 and 5 by
    default), so one noisy batch neither makes nor breaks a best. It is first judged once
    that many values are saved (that first mean is the first best): the first batch alone
    would be as noisy as the values themselves (on pytorch_healthy the first batch, 1.042, is
    lower than any mean of 5 until TRAIN step 16). The best is the lowest moving mean.

    A moving mean is a new best when it is lower than the best so far by more than ``delta`` times
    the best's magnitude (default 0.01, i.e. 1 %); the first value is the first best. The
    sources do not say whether ``delta`` is absolute or relative: we take it as relative so
    that the default means the same for a cross-entropy near 0.1 and a squared error near
    1e4. Small improvements still add up: a value more than 1 % below the old best is a new
    best however many steps it took to get there. A loss stuck at 0 never improves.

    Modes: the training and the validation loss are followed separately and never pooled:
    TRAIN values only against the best TRAIN value, EVAL values against the best EVAL value.
    The patience parameters count values, not step numbers: saved steps of that mode (a loss
    saved every 500 steps with ``patience_train=5`` waits 2500 training steps), so the rule
    behaves the same whatever the save interval and however EVAL steps interleave in the
    global counter. Steps of a trial without modes (GLOBAL) count as training; PREDICT steps
    are ignored. It keeps firing at each further value without improvement.

    Keras (``evaluator.rules.kit.modes.is_epoch_end_log``): Keras' per-step ``X`` is a running
    mean that resets every epoch (a sawtooth that looks flat late in every epoch), and at
    the epoch-end EVAL step ``X`` is the training epoch mean while ``val_X`` is the
    validation mean. So that a healthy Keras run does not fire on the sawtooth, once a loss
    has shown an epoch-end log the rule follows only its epoch-end logs: ``X`` there is the
    training value and ``val_X`` the validation value, one of each per epoch, and the
    patience parameters count epochs; the per-step running means before the first epoch end
    are dropped (both bests start again from the first epoch-end log). The epoch-end ``X`` is
    never taken as a validation value. An epoch-end log is already a mean over the whole
    epoch, so it is not averaged again: its moving mean is of one value, and a loss flat from
    the first epoch fires at the ``patience``-th epoch end after it (a moving mean of
    ``patience`` epoch means fired about 2x ``patience`` epochs after a plateau began: EVAL
    mode step 95 on an overfitting Keras run where every reading of the docs fires by 66).
    Noise measured on the real-hook trials' per-batch losses: the median move from one
    saved step to the next is 1.7 % (pytorch_healthy), 3.2 % (keras_healthy), 16-21 % (the
    overfit trials), all above the 1 % ``delta``, so per-step values are averaged; the
    epoch means of keras_healthy fall 14-36 % per epoch and those of keras_overfit move by
    0.1-4.7 % with no reversal from noise (its validation mean rises at every epoch from the
    second on), so one epoch mean is not smoothed further. The window of per-step values is
    the shortest measured to keep every healthy run quiet with a margin: windows of
    ``patience``, ``ceil(patience / 2)`` and ``ceil(patience / 5)`` values all kept
    keras_healthy, pytorch_healthy, xgboost_healthy and the numpy healthy run quiet; half is
    taken, not the shortest, as healthy runs with noisier batches than these exist (the overfit
    trials' batches move by 16-21 %). A moving mean of ``patience`` values fired about 2x
    ``patience`` values after a plateau began.

    Which window decided is in the evidence: the quantity names "moving mean of N values"
    (N = ``ceil(patience / 2)`` for per-step values, 1 for epoch-end logs).

    Windows and the earliest firing: per-step values of a mode are averaged over the last
    ``w = ceil(patience / 2)`` of them, so the earliest firing is at the ``w + patience``-th
    saved value of that mode (the first full window is the first best, ``patience`` more
    without a new best; the 8th TRAIN value and the 15th EVAL value by default), and a plateau
    fires about ``w + patience`` values after it begins. Keras epoch-end logs: the
    ``patience + 1``-th epoch end, and a plateau fires ``patience`` epoch ends after its last
    improvement.

    Evidence: each value after the first of its role records the number of values since
    the best against ``patience_train`` / ``patience_validation`` (fires when ``>=``).

    Only scalar (one-element) tensors are tracked; a NaN value is never an improvement.

    Diagnosis: every firing also says what the loss did: ``converged``, ``not_learning``,
    ``diverging``, ``oscillating`` or ``overfitting``, with the figures that decided it (fall
    since the start, recent trend, noise measured on the series), in the reason's
    ``diagnosis``, ``explanation`` and ``diagnosis_figures`` and at the end of its sentence.
    How each is decided: ``evaluator.rules.diagnosis`` ("Diagnosing a loss-progress firing"
    below). With ``ignore_converged=true`` a firing diagnosed ``converged`` is a note (a
    ``rule_note`` log line, ``evidence.notes`` in the result file), not an issue, and the
    rule goes on checking: a later firing with any other diagnosis still fires.
    """

    PARAMETERS = (
        Param("patience_train", "5", "int", "Saved TRAIN values without a new best before firing."),
        Param(
            "patience_validation",
            "10",
            "int",
            "Saved EVAL values without a new best before firing.",
        ),
        Param(
            "delta",
            "0.01",
            "float",
            "Fraction of the best value a new value must be lower by to be a new best.",
        ),
        IGNORE_CONVERGED,
    )

    def __init__(
        self,
        base_trial: Any,
        patience_train: str | int = "5",
        patience_validation: str | int = "10",
        delta: str | float = "0.01",
        ignore_converged: str | bool = "False",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.progress = LossProgress(name, ignore_converged)
        self.patience = {
            "train": parse_int(name, "patience_train", patience_train, minimum=1),
            "validation": parse_int(name, "patience_validation", patience_validation, minimum=1),
        }
        self.delta = parse_float(name, "delta", delta)
        if self.delta < 0:
            raise ConfigurationError(f"{name} parameter delta must be >= 0, got {delta!r}")
        self.selection = TensorSelection(name, ["losses"], None)
        self._losses: dict[str, _Loss] = {}
        self._skipped: set[str] = set()  # not scalar

    def selection_hints(self) -> list[SelectionHint]:
        return [
            dataclasses.replace(
                self.selection.hint(),
                parameter=None,
                advice="save the loss in the hook's losses collection (Overtraining has no "
                "selection parameter)",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        raw_mode, mode_step = trial.mode_modestep(step)
        mode = as_training(raw_mode)
        if mode not in _ROLE or mode_step is None:
            return False
        fired = False
        for name in self.selection.names(trial, step=step):
            if name in self._skipped:
                continue
            loss = self._losses.get(name)
            if loss is None:
                loss = self._losses[name] = _Loss(self._fresh())
            if mode == EVAL:
                pair = epoch_end_pair(trial, name, step, not_scalar=self._skipped)
                if pair is not None:
                    if not loss.epoch_logs:  # from now on: epoch-end logs only
                        loss.epoch_logs = True
                        loss.roles = self._fresh(epoch_means=True)
                    self.progress.saw(name, step, pair[0])  # the training epoch mean
                    self.progress.saw(VALIDATION_PREFIX + name, step, pair[1])
                    for role, mean in zip(("train", "validation"), pair):
                        fired = (
                            self._observe(name, loss, role, mean, step, raw_mode, mode_step)
                            or fired
                        )
                    continue
                if is_epoch_end_log(trial, name, step):
                    continue  # the training epoch mean without a usable val_ value
            if loss.epoch_logs:
                continue  # a Keras running mean: followed at its epoch-end logs only
            value = value_in_mode(trial, name, step, mode, not_scalar=self._skipped)
            if value is None:
                continue
            self.progress.saw(name, step, value)
            fired = (
                self._observe(name, loss, _ROLE[mode], value, step, raw_mode, mode_step) or fired
            )
        return fired

    def _fresh(self, epoch_means: bool = False) -> dict[str, _Best]:
        """New bests; an epoch-end log is already the mean over its epoch's batches, so its
        moving mean is of one value (``_Best.size`` 1), per-step values of half ``patience``."""
        return {
            role: _Best(1 if epoch_means else -(-size // 2)) for role, size in self.patience.items()
        }

    def _observe(
        self,
        name: str,
        loss: _Loss,
        role: str,
        value: float,
        step: int,
        mode: ModeKeys,
        mode_step: int,
    ) -> bool:
        # The curve behind the verdict: training and validation loss, one series per mode.
        self.evidence.record(
            step, name, quantity="loss", value=value, mode="TRAIN" if role == "train" else "EVAL"
        )
        best = loss.roles[role]
        if not best.observe(value, self.delta):
            return False
        which = f"{role} loss" + (" (epoch-end logs)" if loss.epoch_logs else "")
        window = f"moving mean of {best.size} value{'s' if best.size > 1 else ''}"
        where = (
            f"{mode.name} step {mode_step} (global step {step})"
            if mode != GLOBAL
            else f"step {step}"
        )
        followed = (
            name if not (loss.epoch_logs and role == "validation") else VALIDATION_PREFIX + name
        )
        series_mode = EVAL if role == "validation" else TRAIN
        return self.evidence.compare(
            step,
            followed,
            quantity=f"{which} values without a new best ({window})",
            value=best.since,
            parameter=_PARAMETER[role],
            threshold=self.patience[role],
            fires_when=">=",
            mode=mode,
            mode_step=mode_step,
            sentence=lambda: (
                f"{self.rule_name}: {name} {which} has not improved on "
                f"{best.value if best.value is not None else math.nan:g} for "
                f"{best.since} saved values at {where}"
            ),
            diagnose=lambda: self.progress.diagnose(self.base_trial, followed, series_mode, step),
        )
