"""Which mode a saved value belongs to: one answer for every built-in rule that follows a loss.

Rules never compare or pool values of different modes. A step's mode is the one its index file
records; a trial written without modes (XGBoost, a hook that never set one) has only GLOBAL
steps, and those count as training (``as_training``).

Keras' epoch-end logs
---------------------
smdebug's ``KerasHook`` forces a save at the end of every epoch. With
``fit(validation_data=...)`` that step is an EVAL step holding Keras' epoch logs: ``X`` is the
TRAINING epoch mean of ``X`` (the index file lists ``X`` twice; the later entry, the one read,
is the epoch log) and ``val_X`` the validation mean. ``is_epoch_end_log`` recognises such a
step by ``val_X`` being saved at an EVAL step together with ``X``. At that step ``X`` is NOT a
value of the EVAL series of ``X``: ``value_in_mode(..., EVAL)`` returns None for it, and
``value_in_mode(..., TRAIN)`` returns None too (the step has no TRAIN mode step; a rule that
wants the training epoch mean asks ``epoch_end_pair``, which gives the (training mean,
validation mean) pair).
"""

from __future__ import annotations

from typing import Any, overload

from evaluator.modes import ModeKeys
from evaluator.rules.kit.selection import scalar_at

__all__ = [
    "TRAINING",
    "VALIDATION_PREFIX",
    "as_training",
    "epoch_end_pair",
    "is_epoch_end_log",
    "mode_of",
    "pass_ended",
    "step_in_mode",
    "value_in_mode",
]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
TRAINING = (TRAIN, GLOBAL)  # the modes whose steps are training steps
VALIDATION_PREFIX = "val_"  # Keras' name for the validation counterpart of a metric


@overload
def as_training(mode: ModeKeys) -> ModeKeys: ...
@overload
def as_training(mode: ModeKeys | None) -> ModeKeys | None: ...
def as_training(mode: ModeKeys | None) -> ModeKeys | None:
    """The mode a rule follows a step's values in: GLOBAL (no modes) counts as TRAIN."""
    return TRAIN if mode == GLOBAL else mode


def mode_of(trial: Any, step: int) -> tuple[ModeKeys | None, int | None]:
    """``(mode, mode step)`` of global ``step``, GLOBAL mapped to TRAIN (its mode step is the
    global step); ``(None, None)`` for a step the trial does not know."""
    mode, mode_step = trial.mode_modestep(step)
    if mode is None or mode_step is None:
        return None, None
    return as_training(mode), mode_step


def step_in_mode(trial: Any, step: int, mode: ModeKeys = TRAIN) -> tuple[ModeKeys, int] | None:
    """``(mode, mode step)`` of global ``step`` as the trial records them (GLOBAL kept), when
    the step is one of ``mode`` (GLOBAL counting as TRAIN: ``as_training``); None for a step
    of another mode or one the trial does not know."""
    raw_mode, mode_step = trial.mode_modestep(step)
    if raw_mode is None or mode_step is None or as_training(raw_mode) != mode:
        return None
    return raw_mode, mode_step


def is_epoch_end_log(trial: Any, name: str, step: int) -> bool:
    """Whether ``name`` at global ``step`` is a Keras epoch-end log, i.e. the step is an EVAL
    step where both ``name`` and ``val_<name>`` are saved: ``name`` there is the training
    epoch mean, not a validation value."""
    if name.startswith(VALIDATION_PREFIX):
        return False
    if trial.mode(step) != EVAL:
        return False
    names = trial.tensor_names(step=step)
    return name in names and VALIDATION_PREFIX + name in names


def _scalar(trial: Any, name: str, step: int, not_scalar: set[str] | None) -> float | None:
    return scalar_at(trial, name, step, not_scalar=set() if not_scalar is None else not_scalar)


def value_in_mode(
    trial: Any, name: str, step: int, mode: ModeKeys, *, not_scalar: set[str] | None = None
) -> float | None:
    """The one-element tensor ``name`` at global ``step`` as a value of ``mode`` (TRAIN,
    EVAL or PREDICT; GLOBAL steps count as TRAIN), or None: not saved there, saved in another
    mode, a Keras epoch-end log (neither a TRAIN nor an EVAL value), or not a scalar (then
    the name is added to ``not_scalar``)."""
    step_mode, _ = mode_of(trial, step)
    if step_mode is None or step_mode != as_training(mode):
        return None
    if step_mode == EVAL and is_epoch_end_log(trial, name, step):
        return None
    return _scalar(trial, name, step, not_scalar)


def epoch_end_pair(
    trial: Any, name: str, step: int, *, not_scalar: set[str] | None = None
) -> tuple[float, float] | None:
    """At a Keras epoch-end log of ``name``: ``(training epoch mean, validation mean)``, the
    values of ``name`` and ``val_<name>``; None at any other step or if either is missing or
    not a scalar."""
    if not is_epoch_end_log(trial, name, step):
        return None
    train = _scalar(trial, name, step, not_scalar)
    val = _scalar(trial, VALIDATION_PREFIX + name, step, None)
    if train is None or val is None:
        return None
    return train, val


def pass_ended(trial: Any, last_eval_step: int) -> bool:
    """When the steps to evaluate have run out: whether the validation pass whose newest saved
    step is ``last_eval_step`` is complete, so it can be judged there: the next saved step is
    not an EVAL step, or no step follows and training has ended."""
    later = [s for s in trial.steps() if s > last_eval_step]
    if later:
        return bool(trial.mode(later[0]) != EVAL)
    return bool(trial.loaded_all_steps)
