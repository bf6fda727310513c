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
    pass_ended,
    value_in_mode,
)
from evaluator.rules.kit.params import Param, parse_bool, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._cadence import MIN_NOISY_VALUES, RESOLUTION_PERCENT, Cadence
from rules_builtin._progress import IGNORE_CONVERGED, NOISE_AWARE, LossProgress
from rules_builtin._warmup import WarmUp
from rules_builtin.registry import register

__all__ = ["Overtraining"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

# Which loss a mode's value is: GLOBAL (a hook that never set modes) counts as training.
_ROLE = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "validation"}
_PARAMETER = {"train": "patience_train", "validation": "patience_validation"}


@dataclass
class _Best:
    """One loss in one role: its last ``size`` values, the best (lowest) moving mean of them,
    and how many values since that best. The mean is of the values so far while fewer than
    ``size`` are saved, so the first value is the first best."""

    size: int = 1
    window: deque[float] = field(default_factory=deque)
    value: float | None = None
    since: int = 0
    mean: float = math.nan  # the latest moving mean
    base: int = 1  # the size without noise (``size`` grows from it)
    cadence: Cadence = field(default_factory=Cadence)  # the values, for their noise

    def observe(self, value: float, delta: float) -> bool:
        """Take ``value``; whether its moving mean was compared with an earlier best."""
        self.window.append(value)
        while len(self.window) > self.size:
            self.window.popleft()
        finite = [v for v in self.window if not math.isnan(v)]  # NaN: no value, no best
        self.mean = mean = math.fsum(finite) / len(finite) if finite else math.nan
        if self.value is None:
            if math.isnan(mean):  # NaN from the first values on: no improvement, counted
                self.since += 1
                return True
            self.value, self.since = mean, 0
            return False
        if not math.isnan(value) and mean < self.value - delta * abs(self.value):
            self.value, self.since = mean, 0
        else:
            self.since += 1
        return True


@dataclass
class _Loss:
    roles: dict[str, _Best]
    epoch_logs: bool = False  # a Keras epoch-end log of this loss has been seen
    pass_values: list[float] = field(default_factory=list)  # the open validation pass
    pass_end: tuple[int, int] = (0, 0)  # its last (global step, EVAL mode step)


@register
class Overtraining(Rule):
    """Fires at a step where a loss of the ``losses`` collection has gone ``patience_train``
    (default 5) saved TRAIN values, or ``patience_validation`` (default 10) validation passes,
    without a new best.

    Training loss: at each saved TRAIN value, the moving mean of the last ``ceil(patience_train
    / 2)`` saved TRAIN values (3 by default), of the values so far while fewer are saved, so
    the first value is the first best and a loss flat from its start fires at the
    ``patience_train``-th value after it. One noisy batch neither makes nor breaks a best.

    Validation loss: one value per validation pass (a run of consecutive EVAL steps), the mean
    of the pass's values, judged once the pass is complete: at the first non-EVAL step after
    it, where it fires, or, when the data ends with it, at its last EVAL step (a pass cut by
    ``end_step`` is not judged). A pass mean is already a mean over its batches, so it is not
    averaged again; two validation batches of different difficulty in one pass (an easy and a
    hard one) never make a best the other cannot beat.

    A mean is a new best when it is lower than the best so far by more than ``delta`` times
    the best's magnitude (default 0.01, i.e. 1 %). The sources do not say whether ``delta``
    is absolute or relative: we take it as relative so that the default means the same for a
    cross-entropy near 0.1 and a squared error near 1e4. Small improvements still add up: a
    value more than 1 % below the old best is a new best however many steps it took to get
    there. A loss stuck at 0 never improves.

    NaN: a NaN value is never an improvement and counts as a value without one; the moving
    mean is of the finite values of its window (NaN when there are none), so a loss NaN in its
    first saved values takes its first best at its first finite value and is judged from there
    (a NaN from the first values on, with no finite one, fires after ``patience``).

    Modes: the training and the validation loss are followed separately and never pooled.
    The patience parameters count values, not step numbers: saved TRAIN values and validation
    passes (a loss saved every 500 steps with ``patience_train=5`` waits 2500 training steps),
    so the rule behaves the same whatever the save interval and however EVAL steps interleave
    in the global counter. Steps of a trial without modes (GLOBAL: XGBoost's ``train-*`` and
    ``validation-*`` metrics) count as training values; PREDICT steps are ignored. It keeps
    firing at each further value without improvement.

    Keras (``evaluator.rules.kit.modes.is_epoch_end_log``): Keras' per-step ``X`` is a running
    mean that resets every epoch (a sawtooth that looks flat late in every epoch), and at
    the epoch-end EVAL step ``X`` is the training epoch mean while ``val_X`` is the
    validation mean. So that a healthy Keras run does not fire on the sawtooth, once a loss
    has shown an epoch-end log the rule follows only its epoch-end logs: ``X`` there is the
    training value and ``val_X`` the validation value, one of each per epoch, and the
    patience parameters count epochs; the per-step running means before the first epoch end
    are dropped (both bests start again from the first epoch-end log). The epoch-end ``X`` is
    never taken as a validation value, and an epoch-end log is not averaged again.

    Windows, measured (bench/DETECTION.md; noise: the median move from one saved value to the
    next is 1.7 % on pytorch_healthy's batches, 3.2 % on keras_healthy's, 16-21 % on the
    overfit trials', all above the 1 % ``delta``): per-step training values need a moving
    mean, and the window that decides is named in the evidence. Windows of 1, 2, 3 and 5
    values all keep the healthy real-hook, numpy and TensorBoard runs quiet (at most 4 values
    without a new best against ``patience_train`` 5 on pytorch_healthy and keras_healthy);
    windows of 1 and 2 fire at step 17 on pytorch_overfit, whose noisy per-batch training
    loss is still falling (its epoch means fall 1-3 % per epoch; its labelled fault starts
    at 47), and 3 (``ceil(patience_train / 2)``) is the shortest that does not. Validation
    pass means and epoch-end logs need none: the documented readings that count saved values
    and passes (bench/allowed/) fire no earlier than the rule on the labelled trials. The
    old moving mean of ``ceil(patience_validation / 2)`` EVAL values, judged only once full,
    fired 36 saved steps after every reading on the numpy overfit run (123 against 87).

    Earliest firing: the ``patience_train``-th TRAIN value after the first (TRAIN step 5 by
    default); the ``patience_validation``-th validation pass after the first (judged at the
    step after it); Keras: the ``patience + 1``-th epoch end. A plateau fires ``patience``
    values after its last improvement, up to ``ceil(patience_train / 2) - 1`` values more for
    training values when the loss was falling fast into it.

    Evidence: each value after the first of its role records the number of values (passes,
    epoch ends) since the best against ``patience_train`` / ``patience_validation`` (fires
    when ``>=``); its quantity names the window: "moving mean of N values", or "means of
    validation passes".

    Only scalar (one-element) tensors are tracked.

    Sparse and noisy logs (``noise_aware``, default true): for a loss logged less often than
    every mode step, its noise is measured (``rules_builtin._cadence``) and the moving mean
    and ``patience_*`` grow to the fewest values whose mean resolves ``delta`` (at least 1 %)
    at one standard error; a new best must then beat the old by that much. Training values
    logged while a logged learning rate still rises (warm-up: ``rules_builtin._warmup``)
    join the moving mean but are not judged. A loss logged at every step keeps the
    documented counts (``noise_aware=false``: always).

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
        NOISE_AWARE,
    )

    def __init__(
        self,
        base_trial: Any,
        patience_train: str | int = "5",
        patience_validation: str | int = "10",
        delta: str | float = "0.01",
        ignore_converged: str | bool = "False",
        noise_aware: str | bool = "True",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.progress = LossProgress(name, ignore_converged)
        self.noise_aware = parse_bool(name, "noise_aware", noise_aware)
        self._warmup = WarmUp(base_trial)
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
        if raw_mode is None or mode_step is None:
            return False
        fired = False
        if mode != EVAL:  # a validation pass before this step is complete: judge it
            for name, open_pass in self._losses.items():
                fired = self._close(name, open_pass, step, raw_mode, mode_step) or fired
        if mode not in _ROLE:
            return fired
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
            if mode == EVAL:  # judged as the mean of its validation pass once it is complete
                self.evidence.record(step, name, quantity="loss", value=value, mode="EVAL")
                loss.pass_values.append(value)
                loss.pass_end = (step, mode_step)
                continue
            fired = (
                self._observe(name, loss, _ROLE[mode], value, step, raw_mode, mode_step) or fired
            )
        return fired

    def invoke_at_end(self) -> int | None:
        """The data has ended: judge a validation pass still under way if it is complete
        (training ended after it, or the next saved step is not an EVAL step); it fires at
        its last EVAL step."""
        trial = self.base_trial
        ends = [loss.pass_end[0] for loss in self._losses.values() if loss.pass_values]
        if not ends:
            return None
        if not pass_ended(trial, max(ends)):
            return None
        fired_at = None
        for name, loss in self._losses.items():
            step, mode_step = loss.pass_end
            if loss.pass_values and self._close(name, loss, step, EVAL, mode_step):
                fired_at = step if fired_at is None else min(fired_at, step)
        return fired_at

    def _close(self, name: str, loss: _Loss, step: int, mode: ModeKeys, mode_step: int) -> bool:
        """Judge the mean of the validation pass of ``name`` that has just ended."""
        values, loss.pass_values = loss.pass_values, []
        if not values or loss.epoch_logs:
            return False
        mean = math.fsum(values) / len(values)
        return self._observe(
            name, loss, "validation", mean, step, mode, mode_step, pass_size=len(values)
        )

    def _fresh(self, epoch_means: bool = False) -> dict[str, _Best]:
        """New bests; an epoch-end log and a validation pass's mean are already means over
        their batches, so their moving mean is of one value (``_Best.size`` 1); per-step
        training values are averaged over half ``patience_train``."""
        train = 1 if epoch_means else -(-self.patience["train"] // 2)
        return {"train": _Best(train, base=train), "validation": _Best(1)}

    def _observe(
        self,
        name: str,
        loss: _Loss,
        role: str,
        value: float,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        pass_size: int = 0,
    ) -> bool:
        if not pass_size:  # the curve behind the verdict (a pass's values are recorded singly)
            self.evidence.record(
                step,
                name,
                quantity="loss",
                value=value,
                mode="TRAIN" if role == "train" else "EVAL",
            )
        best = loss.roles[role]
        patience, delta = self.patience[role], self.delta
        if self.noise_aware:  # windows and patience grown to what the noise allows
            best.cadence.add(mode_step, value)
            c = best.cadence
            sparse = c.count >= MIN_NOISY_VALUES and c.interval() > 1  # not every step
            needed = c.needed(100 * delta, means=1) if sparse else 1
            best.size = max(best.base, needed)
            patience = max(patience, needed)
            delta = delta if needed <= 1 else max(delta, RESOLUTION_PERCENT / 100)
            if role == "train" and self._warmup.rising_at(step):
                best.window.append(value)  # still in its moving mean, but not judged
                while len(best.window) > best.size:
                    best.window.popleft()
                return False
        if not best.observe(value, delta):
            return False
        which = f"{role} loss" + (" (epoch-end logs)" if loss.epoch_logs else "")
        if pass_size:
            which = f"{role} loss (means of validation passes)"
        window = f"moving mean of {len(best.window)} value{'s' if len(best.window) > 1 else ''}"
        where = step_words(self.base_trial, step, mode, mode_step)
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
            threshold=patience,
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
