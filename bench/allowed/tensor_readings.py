"""Readings of the tensor rules' documented semantics (VanishingGradient, WeightUpdateRatio,
ClassImbalance, SaturatedActivation): the package docstring says what a reading is.

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
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL

__all__ = ["class_imbalance", "saturated_activation", "vanishing_gradient", "weight_update_ratio"]


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
