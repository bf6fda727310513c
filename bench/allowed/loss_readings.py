"""Readings of the loss rules' documented semantics (LossNotDecreasing, Overtraining,
Overfit): the package docstring says what a reading is.

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

Overtraining (AWS: container-protocol.md 2.3 and the rule's page): per loss tensor, the best
training loss and the best validation loss so far; a new best is lower than the best by more
than ``delta``; it fires when the training loss has not improved for ``patience_train`` steps or
the validation loss for ``patience_validation`` steps (the first value is the first best; a NaN
is never an improvement, and a NaN before any best counts as a value without one). The
documents leave open, and each combination is a reading (``overtraining``):

* what "the loss" at a step is: each saved value of the mode, or the mean of each pass (a run
  of consecutive saved steps of one mode; Keras: its epoch-end logs, ``X`` the training and
  ``val_X`` the validation epoch mean, are that mean, one per epoch). The documents name no
  moving mean, so none is a reading: a pass mean is the only mean they can be read to mean;
* whether ``patience`` counts values (saved values or passes) or mode steps (the mode step of
  the value, of a pass's last value; a Keras epoch-end log's EVAL mode step);
* whether ``delta`` is relative to the best or absolute;
* in a trial without modes (XGBoost's ``train-*`` and ``validation-*`` at the same steps):
  every series counts as training (``patience_train``), or the ``validation``/``val`` ones as
  validation (``patience_validation``).

A reading fires at the first value at or after the onset where the count since its best reaches
``patience`` (on any loss tensor, either role); the latest allowed step is the latest of the
readings' firings (a reading that never fires on the fault does not bound it).

Overfit (AWS: container-protocol.md 2.3 and the rule's page): from ``start_step`` on, the mean
validation (EVAL) loss against the mean training (TRAIN) loss of the same tensor, ``ratio =
(val - train) / train``, fires when the ratio exceeds ``ratio_threshold`` for ``patience``
consecutive evaluations. Each reading of "mean" is a reading (``overfit``):

* pass means: at each complete validation pass (judged at its last EVAL step), the mean of its
  values against the mean of the training phase before it;
* cumulative means: at each EVAL value, the mean of every EVAL value against the mean of every
  TRAIN value saved from ``start_step`` on;
* Keras epoch-end logs: at each, ``val_X`` (the validation mean) against ``X`` (the training
  epoch mean), the only evaluations on a Keras trial in this reading.

Keras' epoch-end ``X`` is never a validation value. A reading fires at its first evaluation at
or after the onset that ends ``patience`` consecutive ones above the threshold; the latest of
them is the bound. A trial without modes has no mean validation loss beside a training one
here: no bound (the onset).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import epoch_end_pair, is_epoch_end_log

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

__all__ = ["loss_not_decreasing", "overfit", "overtraining"]


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


def _count_fires(
    values: list[tuple[int, int, float]],
    onset: int,
    patience: int,
    delta: float,
    relative: bool,
    by_mode_step: bool,
) -> int | None:
    """The first global step at or after ``onset`` where ``values`` (mode step, global step,
    value) have gone ``patience`` positions (values, or mode steps) without a new best."""
    best: float | None = None
    at: int | None = None  # the position of the best (of the first value before any best)
    for i, (ms, g, value) in enumerate(values):
        position = ms if by_mode_step else i
        if at is None:
            at = position
        margin = (delta * abs(best) if relative else delta) if best is not None else 0.0
        if not math.isnan(value) and (best is None or value < best - margin):
            best, at = value, position
            continue
        if g >= onset and position - at >= patience:
            return g
    return None


def _runs(trial: Any, series: list[tuple[int, int, float]]) -> list[list[tuple[int, int, float]]]:
    """``series`` cut into passes: runs of values with no saved step of another mode between."""
    modes = {g: trial.mode(g) for g in trial.steps()}
    order = sorted(modes)
    index = {g: i for i, g in enumerate(order)}
    runs: list[list[tuple[int, int, float]]] = []
    for item in series:
        if runs:
            last = runs[-1][-1][1]
            between = order[index[last] + 1 : index[item[1]]]
            if all(modes[b] == modes[item[1]] for b in between):
                runs[-1].append(item)
                continue
        runs.append([item])
    return runs


def _pass_means(trial: Any, series: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """One value per pass: its mean, at its last value's mode step and global step."""
    return [
        (r[-1][0], r[-1][1], math.fsum(v for _, _, v in r) / len(r)) for r in _runs(trial, series)
    ]


def _epoch_logs(trial: Any, name: str) -> list[tuple[int, int, float, float]]:
    """Keras' epoch-end logs of ``name``: (EVAL mode step, global step, X, val_X)."""
    out = []
    for s in trial.tensor(name).steps(mode=EVAL):
        g = trial.global_step(EVAL, s)
        pair = epoch_end_pair(trial, name, g) if g is not None else None
        if pair is not None:
            out.append((s, g, pair[0], pair[1]))
    return out


_VALIDATION_NAME = re.compile(r"^(val|validation|eval|test)[-_/]", re.IGNORECASE)


def _overtraining_series(
    trial: Any, name: str, passes: bool, split: bool, patience: tuple[int, int]
) -> list[tuple[list[tuple[int, int, float]], int]]:
    """The (series, patience) of ``name`` in one reading: TRAIN and EVAL values (or pass
    means; Keras: its epoch-end logs), or, without modes, the name's values."""
    if not any(trial.steps(mode=m) for m in (TRAIN, EVAL)):
        validation = split and _VALIDATION_NAME.match(name) is not None
        return [(_series(trial, name, GLOBAL), patience[1] if validation else patience[0])]
    logs = _epoch_logs(trial, name) if passes else []
    if logs:
        train = [(s, g, x) for s, g, x, _ in logs]
        val = [(s, g, v) for s, g, _, v in logs]
    else:
        train, val = _series(trial, name, TRAIN), _series(trial, name, EVAL)
        if passes:
            train, val = _pass_means(trial, train), _pass_means(trial, val)
    return [(train, patience[0]), (val, patience[1])]


def overtraining(
    trial: Any, onset: int, patience_train: int = 5, patience_validation: int = 10,
    delta: float = 0.01,
) -> int | None:  # fmt: skip
    """The latest of the Overtraining readings' firings at or after ``onset`` (docstring)."""
    modal = any(trial.steps(mode=m) for m in (TRAIN, EVAL))
    firings = []
    for passes, by_mode_step, relative, split in itertools.product((False, True), repeat=4):
        if (modal and split) or (not modal and passes):
            continue  # the split is a reading of trials without modes, passes of those with
        found = []
        for name in trial.tensor_names(collection="losses"):
            for values, patience in _overtraining_series(
                trial, name, passes, split, (patience_train, patience_validation)
            ):
                fired = _count_fires(values, onset, patience, delta, relative, by_mode_step)
                if fired is not None:
                    found.append(fired)
        if found:
            firings.append(min(found))  # any loss, either role, fires the rule
    return max(firings) if firings else None


def _overfit_evaluations(
    trial: Any, name: str, reading: str, start_step: int
) -> list[tuple[int, float]]:
    """(global step, ratio) of each evaluation of ``name`` in one Overfit reading."""
    if reading == "passes" and _epoch_logs(trial, name):
        pairs = [(g, x, v) for _, g, x, v in _epoch_logs(trial, name) if g >= start_step]
        return [(g, (v - x) / abs(x)) for g, x, v in pairs if x != 0]
    merged = sorted(
        [(g, TRAIN, v) for _, g, v in _series(trial, name, TRAIN) if g >= start_step]
        + [(g, EVAL, v) for _, g, v in _series(trial, name, EVAL) if g >= start_step]
    )
    out: list[tuple[int, float]] = []
    train: list[float] = []
    val: list[float] = []
    cumulative = reading == "cumulative"
    for i, (g, mode, value) in enumerate(merged):
        if mode == TRAIN:
            if not cumulative and val:  # a new training phase after a validation pass
                train, val = [], []
            train.append(value)
            continue
        val.append(value)
        ends = i + 1 == len(merged) or merged[i + 1][1] == TRAIN
        if train and (cumulative or ends):
            t, v = math.fsum(train) / len(train), math.fsum(val) / len(val)
            if t != 0:
                out.append((g, (v - t) / abs(t)))
    return out


def overfit(
    trial: Any, onset: int, patience: int = 1, ratio_threshold: float = 0.1, start_step: int = 0
) -> int | None:
    """The latest of the Overfit readings' firings at or after ``onset`` (docstring)."""
    if not (trial.steps(mode=TRAIN) and trial.steps(mode=EVAL)):
        return onset
    names = trial.tensor_names(collection="losses") or trial.tensor_names()
    firings = []
    for reading in ("passes", "cumulative"):
        found = []
        for name in names:
            above = 0
            for g, ratio in _overfit_evaluations(trial, name, reading, start_step):
                above = above + 1 if ratio > ratio_threshold else 0
                if g >= onset and above >= patience:
                    found.append(g)
                    break
        if found:
            firings.append(min(found))
    return max(firings) if firings else None


# ---------------------------------------------------------------- f23's readings
