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
train and validation metrics at the same steps) counts global steps for both.

VanishingGradient (2.3): a saved step of the ``gradients`` collection where a tensor's mean
|gradient| is below ``threshold``. Readings: today's documents evaluate every step; the 2019
notes say "step 0 always returns False". Each fires at the first such saved step at or after
the onset (the second reading: after step 0); gradients saved every N steps make it the next
saved gradient step (the real-hook trials: global step 5).

WeightUpdateRatio (2.3): at a saved step s of a weight, compared with the previous saved step
p (with ``num_steps``, the oldest at most ``num_steps`` back): fires when
||w(s) - w(p)|| / (||w(p)|| + epsilon) is above ``large_threshold`` or below
``small_threshold``; weights must be saved at two steps. No mode is named: one reading takes
every saved step, the other TRAIN steps only. Each fires at the first compared s at or after
the onset: the second saved step of the weight (the trials save weights every 3 TRAIN steps:
TRAIN step 3, global 6, not the onset's second TRAIN step).

ClassImbalance (2.3): labels (``labels_regex``) counted over every saved step; judged once
``samples`` labels have been seen: fires when the largest class count over the smallest is
above ``threshold_imbalance``. It fires at the first saved step at or after the onset where
both hold (the numpy run: 128 labels a step, the fourth labelled step).

SaturatedActivation (2.3): a unit is saturated when its input lies outside the function's
range for more than (100 - ``threshold_inactivity``) % of the batch; fires when more than
``threshold_layer`` % of a layer's units are. The tensors: the documented default regex's
(``tanh_input`` / ``sigmoid_input``) and the tanh / sigmoid layers the training script
labelled (labels.json), as the hooks name their inputs; a Keras ``Dense(activation=f)``'s
input to f is ``inputs @ kernel + bias`` (hook-naming.md). Fires at the first saved step at
or after the onset where a layer is saturated (pytorch_saturated's onset counts inputs
outside the range, 92 %, where only 31 % of the units are saturated for the whole batch: the
documented measure first exceeds 50 % at step 10).

A reading that never fires leaves the onset as the bound. Every other labelled rule has no
documented window: the onset.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import is_epoch_end_log

__all__ = ["NOTES", "latest_allowed", "loss_not_decreasing"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

# What the "latest allowed" column cannot show by itself (figures measured on the trials).
NOTES = [
    "Latest allowed: bench/allowed.py (its docstring: the readings of each rule's documented "
    "semantics, computed on the trial's values, not the rule's code). VanishingGradient (step "
    "0 skipped in the 2019 notes), WeightUpdateRatio (two saved weight steps), ClassImbalance "
    "(samples) and SaturatedActivation (units saturated for the whole batch) are bounded by "
    "their documented waits; rules whose documents define no window (Overfit: a complete "
    "validation pass) by the onset itself.",
    "LossNotDecreasing on Keras trials reads each saved running mean (Keras' loss since the "
    "epoch start) as the mean of the batch losses since the previous saved value of its "
    "epoch (rules_builtin/_running_means.py): keras_sigmoid_flat fires at 22 (TRAIN step 20 "
    "vs 10), the documented comparison, where reading the running means' restart at epoch 1 "
    "as a fall had delayed it to 34.",
    "Noise on the healthy runs (robust sd of second differences, % of the level, whole "
    "TRAIN series): pytorch_healthy 2.0, keras_healthy 2.6 as batch means (what "
    "LossNotDecreasing compares; 0.19 as the saved running means), numpy healthy 14.8; on "
    "the noisy faults: numpy lr_zero 4.8, pytorch_sigmoid_flat 10.8, keras_sigmoid_flat 12.2 "
    "as batch means (1.5 saved). On keras_healthy the closest LossNotDecreasing evaluation "
    "shows a 6.5 % fall against diff_percent 0.1. Before the Keras change: at every "
    "evaluation of the healthy runs (TRAIN and EVAL) the single values fell (smallest: numpy "
    "healthy TRAIN step 30, 3.4 %) and the window means fell by more than diff_percent + 1 SE "
    "except there (27.6 % against SE 29.2 %, noise of the values compared): the narrowest "
    "margin, where an unlucky batch would have fired.",
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


# ---------------------------------------------------------------- f23's readings


def _first_value(trial: Any, name: str, step: int) -> Any:
    try:
        return np.asarray(trial.tensor(name).value(step), dtype=np.float64)
    except Exception:  # not saved there, or not numbers: no value for the reading
        return None


def _firing(readings: list[int | None], onset: int) -> int:
    """The latest firing of the readings that fire; the onset when none does."""
    fired = [f for f in readings if f is not None]
    return max(fired) if fired else onset


def vanishing_gradient(trial: Any, onset: int, threshold: float = 1e-7) -> int:
    """Today's documents: any saved step of the gradients collection whose mean |gradient| is
    below ``threshold``; the 2019 notes: the same, step 0 never evaluated."""
    names = trial.tensor_names(collection="gradients")
    steps = sorted({s for n in names for s in trial.tensor(n).steps()})

    def first(after: int) -> int | None:
        for s in steps:
            if s < after:
                continue
            for n in names:
                value = _first_value(trial, n, s)
                if value is not None and value.size and float(np.mean(np.abs(value))) < threshold:
                    return int(s)
        return None

    return _firing([first(onset), first(max(onset, 1))], onset)


def _ratio_outside(a: Any, b: Any, params: tuple[float, float, float]) -> bool:
    large, small, epsilon = params
    if a is None or b is None or a.shape != b.shape:
        return False
    ratio = float(np.linalg.norm((a - b).ravel()) / (np.linalg.norm(b.ravel()) + epsilon))
    return ratio > large or ratio < small


def weight_update_ratio(
    trial: Any, onset: int, num_steps: int | None, params: tuple[float, float, float]
) -> int:
    """Per weight, the step s compared with the previous saved step p (with ``num_steps``: the
    oldest saved one at most ``num_steps`` back). The documents name no mode: one reading
    takes every saved step (p may be an EVAL step, where weights do not change), the other
    TRAIN steps only (p the previous saved TRAIN step, ``num_steps`` in TRAIN steps)."""
    names = trial.tensor_names(collection="weights")
    modes = [TRAIN] if trial.steps(mode=TRAIN) else []

    def first(mode: ModeKeys) -> int | None:
        found = []
        for n in names:
            series = [(s, s if mode == GLOBAL else trial.global_step(mode, s))
                      for s in trial.tensor(n).steps(mode=mode)]  # fmt: skip
            for i, (s, g) in enumerate(series):
                earlier = [e for e in series[:i] if num_steps is None or e[0] >= s - num_steps]
                if g is None or g < onset or not earlier:
                    continue
                p = earlier[-1] if num_steps is None else earlier[0]
                if _ratio_outside(_first_value(trial, n, g), _first_value(trial, n, p[1]), params):
                    found.append(g)
                    break
        return min(found) if found else None

    return _firing([first(m) for m in [GLOBAL, *modes]], onset)


def _class_ids(value: Any) -> Any:
    if value.ndim >= 2 and value.shape[-1] > 1:
        return np.argmax(value, axis=-1).ravel()
    return np.rint(value).ravel()


def class_imbalance(
    trial: Any, onset: int, samples: int, threshold: float, labels_regex: str
) -> int:
    """Labels counted over every saved step so far; judged once ``samples`` labels have been
    seen: the largest class count over the smallest above ``threshold_imbalance``."""
    pattern = re.compile(labels_regex)
    counts: dict[float, int] = {}
    for s in trial.steps():
        for n in trial.tensor_names(step=s):
            value = _first_value(trial, n, s) if pattern.search(n) else None
            if value is not None and value.size:
                for cls, k in zip(*np.unique(_class_ids(value), return_counts=True)):
                    counts[float(cls)] = counts.get(float(cls), 0) + int(k)
        seen = sum(counts.values())
        if s >= onset and seen >= samples and len(counts) > 1:
            if max(counts.values()) / min(counts.values()) > threshold:
                return int(s)
    return onset


def _saturated_pct(inputs: Any, low: float, high: float, inactivity: float) -> float:
    """% of units (axis 0: samples) inside (low, high) for fewer than ``inactivity`` % of the
    samples, as the documents define a saturated unit."""
    rows = inputs.reshape(inputs.shape[0], -1)
    active = 100.0 * np.mean((rows > low) & (rows < high), axis=0)
    return 100.0 * float(np.mean(active < inactivity))


def _activation_inputs(trial: Any) -> dict[str, tuple[str, str | None]]:
    """tensor -> (function, the Keras layer whose kernel and bias make the function's input
    from the saved ``inputs``, if any): the documented default regex's tensors, and the
    tanh / sigmoid layers the training script labelled (labels.json) as the hook names them."""
    names = trial.tensor_names()
    found: dict[str, tuple[str, str | None]] = {}
    for n in names:
        hit = re.search(r"(tanh|sigmoid)_input", n)
        if hit:
            found[n] = (hit.group(1), None)
    labels = Path(str(trial.path)) / "labels.json"
    evidence = json.loads(labels.read_text()).get("evidence", {}) if labels.is_file() else {}
    layers = (evidence.get("activations_first_saved_train_step") or {}).get("layers", {})
    for layer, about in layers.items():
        fn = about.get("kind")
        if fn not in ("tanh", "sigmoid"):
            continue
        base, call = (layer[:-1].split("[") + ["0"])[:2] if layer.endswith("]") else (layer, None)
        kernel = f"{base}/weights/{base}/kernel:0"
        for n in names:
            if n == f"{base}/inputs":  # Keras: a Dense layer's inline activation needs W, b
                found[n] = (fn, base if kernel in names else None)
            elif re.fullmatch(re.escape(base) + "_input_" + (call or r"\d+"), n):
                found[n] = (fn, None)
    return found


def saturated_activation(trial: Any, onset: int, params: dict[str, str]) -> int:
    """The first saved step at or after the onset where a tanh / sigmoid layer has more than
    ``threshold_layer`` % of its units saturated (inside the function's range for fewer than
    ``threshold_inactivity`` % of the batch); a Keras ``Dense(activation=f)``'s input to f
    is ``inputs @ kernel + bias`` (the saved ``inputs`` are the layer's)."""
    bounds = {
        "tanh": (float(params.get("threshold_tanh_min", -9.4999)),
                 float(params.get("threshold_tanh_max", 9.4999))),
        "sigmoid": (float(params.get("threshold_sigmoid_min", -23)),
                    float(params.get("threshold_sigmoid_max", 16.99999))),
    }  # fmt: skip
    inactivity = float(params.get("threshold_inactivity", 1.0))
    layer_pct = float(params.get("threshold_layer", 50.0))
    tensors = _activation_inputs(trial)
    for s in trial.steps():
        if s < onset:
            continue
        for n, (fn, dense) in tensors.items():
            x = _first_value(trial, n, s)
            if x is not None and dense is not None:
                w = _first_value(trial, f"{dense}/weights/{dense}/kernel:0", s)
                b = _first_value(trial, f"{dense}/weights/{dense}/bias:0", s)
                x = None if w is None or b is None else x @ w + b
            if x is not None and x.ndim and _saturated_pct(x, *bounds[fn], inactivity) > layer_pct:
                return int(s)
    return onset


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
    if rule == "VanishingGradient":
        return vanishing_gradient(trial, onset, float(params.get("threshold", 1e-7)))
    if rule == "WeightUpdateRatio":
        steps = params.get("num_steps")
        return weight_update_ratio(trial, onset, int(steps) if steps else None, (
            float(params.get("large_threshold", 10.0)),
            float(params.get("small_threshold", 1e-8)),
            float(params.get("epsilon", 1e-9))))  # fmt: skip
    if rule == "ClassImbalance":
        return class_imbalance(trial, onset, int(params.get("samples", 500)),
            float(params.get("threshold_imbalance", 10)),
            params.get("labels_regex", ".*labels"))  # fmt: skip
    if rule == "SaturatedActivation":
        return saturated_activation(trial, onset, params)
    return onset
