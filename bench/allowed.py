"""The latest step any documented reading of a rule allows it to fire on a labelled fault
(bench/detection.py's "latest allowed" column), computed from the rule's documented semantics
and the trial's own values, never from the rule's code.

LossNotDecreasing (AWS: /work/shared/docs/reference/container-protocol.md, 2.3): per loss
tensor and mode, a step s is evaluated when it is at least ``num_steps`` after the last
evaluated one and has a comparison step, the newest saved step at least ``num_steps`` before
it; it fires when the loss at s did not fall ``diff_percent`` % below the loss there (a NaN
loss has not fallen). The documents leave open:

* whether ``num_steps`` counts mode steps or saved values (sparse saves differ),
* which mode an unset ``mode`` follows (EVAL first, else TRAIN; both are read here).

Each combination is a reading; its firing on the fault is its first evaluation at or after
the onset that fires (the evaluation schedule runs from the first comparable step whatever
fired before). The latest allowed step is the latest of the readings' firings (a reading
that never fires on the fault does not bound it). The ``increase_threshold_percent``
condition, added after 2020, can only make a reading fire earlier: not used for the bound.

Overtraining: ``patience_train`` saved TRAIN values or ``patience_validation`` saved EVAL
values after the onset without a new best; the latest reading is the one that waits for the
longer of the two (a reading that follows only one series); a trial without modes (XGBoost's
train and validation metrics at the same steps) counts global steps for both. Every other labelled rule has no
documented window: the onset.
"""

from __future__ import annotations

import math
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import is_epoch_end_log

__all__ = ["NOTES", "latest_allowed", "loss_not_decreasing"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

# What the "latest allowed" column cannot show by itself (figures measured on the trials).
NOTES = [
    "Latest allowed: bench/allowed.py (its docstring: the readings of each rule's documented "
    "semantics, computed on the trial's values, not the rule's code). Rules whose documents "
    "define no window are bounded by the onset itself, so a documented wait that is no window "
    "(VanishingGradient skipping step 0 in the 2019 notes, WeightUpdateRatio needing two saved "
    "weight steps, Overfit a complete validation pass, ClassImbalance its samples) shows as NO "
    "there; those rules are outside this change.",
    "LossNotDecreasing on keras_sigmoid_flat fires at 34, the documented comparison at 22 (TRAIN "
    "step 20 vs 10: Keras' running mean 1.4220 -> 1.4284, no fall). It is not forced: there the "
    "window means show a fall the noise does not explain, 1.5406 (TRAIN steps 1..10, epoch 0's "
    "running mean still falling from 1.85) -> 1.4746 (11..20, epoch 1's running mean restarting "
    "at 1.666), 4.29 % against diff_percent 0.1 + 1 SE 1.26 % (noise 2.81 % of the level), so "
    "the means decide. Letting single values decide whatever the means show would fire at 22 "
    "here, but also on a noisy falling loss whenever one batch 10 steps later is unlucky "
    "(tests/unit/rules_builtin/test_loss_not_decreasing.py, "
    "test_noisy_decreasing_dense_loss_is_quiet: -1 %/step, +-10 % noise). At 34 (TRAIN 30) "
    "singles 1.4284 -> 1.4353 and means 1.4746 -> 1.4878 (-0.90 %, SE 0.64 %) agree: it fires. "
    "Telling a Keras running mean's epoch restarts from a fall is not done.",
    "Noise on the healthy runs (robust sd of second differences, % of the level, whole "
    "TRAIN series): pytorch_healthy 2.0, keras_healthy 0.19 (running mean), numpy healthy "
    "14.8; on the noisy faults: numpy lr_zero 4.8, pytorch_sigmoid_flat 10.8, "
    "keras_sigmoid_flat 1.5. At every evaluation of the healthy runs (TRAIN and EVAL) the "
    "single values fell (smallest: numpy healthy TRAIN step 30, 3.4 %) and the window means "
    "fell by more than diff_percent + 1 SE except there (27.6 % against SE 29.2 %, noise of "
    "the values compared): 0 false alarms, the narrowest margin being that one evaluation, "
    "where an unlucky batch would have fired.",
]


def _series(trial: Any, name: str, mode: ModeKeys) -> list[tuple[int, int, float]]:
    """(mode step, global step, value) of a scalar loss in ``mode``, Keras' epoch-end logs
    (the training epoch mean at an EVAL step) left out."""
    tensor = trial.tensor(name)
    out = []
    for s in tensor.steps(mode=mode):
        g = s if mode == GLOBAL else trial.global_step(mode, s)
        if g is None or (mode == EVAL and is_epoch_end_log(trial, name, g)):
            continue
        value = tensor.value(s, mode=mode)
        if getattr(value, "size", 1) != 1:
            return []
        out.append((s, g, float(value.reshape(-1)[0]) if hasattr(value, "reshape") else value))
    return out


def _reading(
    series: list[tuple[int, int, float]], onset: int, num_steps: int, diff: float, saved: bool
) -> int | None:
    """The first firing at or after ``onset`` of one reading (``saved``: ``num_steps`` counts
    saved values, else mode steps)."""
    last: int | None = None
    for i, (ms, g, value) in enumerate(series):
        position = i if saved else ms
        if last is not None and position < last + num_steps:
            continue
        earlier = [j for j in range(i) if (j if saved else series[j][0]) <= position - num_steps]
        if not earlier:
            continue
        last = position
        before = series[earlier[-1]][2]
        fell = value < before - abs(before) * diff / 100  # NaN: not a fall
        if g >= onset and (math.isnan(value) or math.isnan(before) or not fell):
            return g
    return None


def loss_not_decreasing(
    trial: Any, onset: int, num_steps: int = 10, diff_percent: float = 0.1
) -> int | None:
    names = trial.tensor_names(collection="losses")
    modes = [m for m in (EVAL, TRAIN) if trial.steps(mode=m)] or [GLOBAL]
    firings = []
    for mode in modes:
        for saved in (False, True):
            found = []
            for name in names:
                series = _series(trial, name, mode)
                fired = _reading(series, onset, num_steps, diff_percent, saved)
                if fired is not None:
                    found.append(fired)
            if found:
                firings.append(min(found))  # any loss tensor firing fires the rule
    return max(firings) if firings else None


def _overtraining(trial: Any, onset: int, patience_train: int, patience_val: int) -> int | None:
    waits = []
    modes = [(TRAIN, patience_train), (EVAL, patience_val)]
    if not any(trial.steps(mode=m) for m, _ in modes):  # no modes (XGBoost): one series each
        modes = [(GLOBAL, patience_train), (GLOBAL, patience_val)]
    for mode, patience in modes:
        after = [g for g in (trial.global_step(mode, s) for s in trial.steps(mode=mode))
                 if g is not None and g > onset]  # fmt: skip
        if len(after) >= patience:
            waits.append(after[patience - 1])
    return max(waits) if waits else None


def latest_allowed(rule: str, trial: Any, onset: int | None, params: dict[str, str]) -> int | None:
    """The latest step any documented reading of ``rule`` (with ``params`` over the
    defaults) allows it to fire on a fault measurable from ``onset``; None if unknown."""
    if onset is None:
        return None
    if rule == "LossNotDecreasing":
        return loss_not_decreasing(
            trial,
            onset,
            int(params.get("num_steps", 10)),
            float(params.get("diff_percent", 0.1)),
        )
    if rule == "Overtraining":
        return _overtraining(
            trial,
            onset,
            int(params.get("patience_train", 5)),
            int(params.get("patience_validation", 10)),
        )
    return onset
