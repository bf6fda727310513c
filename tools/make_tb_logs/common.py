"""Shared by the run scripts of make_tb_logs: labels measured while training, written beside
the run as ``labels.json`` (docs: tools/make_tb_logs/README.md)."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

# Rules that read what none of these logs hold (activations, labels, images, trees, other
# trials): each run lists them as ending "Insufficient information" unless it logs the data.
NEEDS_ACTIVATIONS = ["DeadRelu", "SaturatedActivation"]
NEEDS_LABELS = ["ClassImbalance", "Confusion"]

# Rules a fault also sets off, by their own definitions (allowed, never required, to fire).
EXPLODING_ALSO = [
    "LossNotDecreasing",
    "NonFiniteValues",
    "Overtraining",
    "PoorWeightInitialization",
]
EXPLODING_WHY = (
    "a NaN loss never decreases (LossNotDecreasing, Overtraining's patience_train, "
    "PoorWeightInitialization's first-steps loss check) and is a non-finite scalar "
    "(NonFiniteValues)"
)
FLAT_ALSO = ["LearningRateSchedule", "Overtraining", "PoorWeightInitialization", "UnchangedTensor"]
FLAT_WHY = (
    "lr 0 leaves every weight unchanged (UnchangedTensor) and the loss flat from the first "
    "steps (PoorWeightInitialization, Overtraining's patience_train); a logged learning rate "
    "of 0 is LearningRateSchedule's"
)
OVERFIT_ALSO = ["LossNotDecreasing"]
OVERFIT_WHY = "the rising validation loss is a loss not decreasing in EVAL mode (LossNotDecreasing)"
STALLED_ALSO = ["Overtraining", "PoorWeightInitialization"]
VANISHING_WHY = (
    "a stalled training loss is what Overtraining's patience_train and PoorWeightInitialization's "
    "first-steps loss check watch; weights or gradient norms that do not move are "
    "UnchangedTensor's"
)


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(steps: list[int], values: list[float]) -> int | None:
    for s, v in zip(steps, values, strict=True):
        if not math.isfinite(v):
            return s
    return None


def stalls(values: list[float], window: int = 10, percent: float = 0.1) -> bool:
    """Whether some window of ``window`` logged values ends without the loss falling by
    ``percent`` % below the mean of the window before it (LossNotDecreasing's defaults)."""
    for end in range(2 * window, len(values) + 1, window):
        before = sum(values[end - 2 * window : end - window]) / window
        now = sum(values[end - window : end]) / window
        if not (now < before * (1 - percent / 100)):
            return True
    return False


def unchanged(
    series: list[list[float]], n: int = 3, rtol: float = 1e-5, atol: float = 1e-8
) -> bool:
    """Whether some logged series holds ``n`` consecutive values equal within numpy.allclose's
    default tolerances (as UnchangedTensor compares them, with its defaults)."""
    for values in series:
        for i in range(len(values) - n + 1):
            last = values[i + n - 1]
            window = values[i : i + n]
            if all(math.isfinite(v) and abs(v - last) <= atol + rtol * abs(last) for v in window):
                return True
    return False


def overfits(train: list[float], val: list[float]) -> bool:
    """Whether validation loss rose from its best while training loss went on falling."""
    best = min(range(len(val)), key=lambda i: val[i])
    return best < len(val) - 1 and val[-1] > val[best] * 1.1 and train[-1] < train[best]


def rounded(x: Any) -> Any:
    if isinstance(x, float):
        return x if not math.isfinite(x) else float(f"{x:.6g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def write_labels(out: Path, labels: dict[str, Any], versions: dict[str, str]) -> None:
    """``labels.json``: what the run is, what was measured, and the expected verdicts:
    ``expected`` must fire, ``also`` may fire (the fault sets them off by their own
    definitions), ``quiet`` must end with no issue found, ``insufficient`` must end
    "Insufficient information"; any other rule must not fire. ``reason`` says why."""
    labels = {"versions": {"python": platform.python_version(), **versions}, **labels}
    for key in ("expected", "also", "quiet", "insufficient"):
        labels[key] = sorted(set(labels.get(key, [])))
    both = (set(labels["expected"]) | set(labels["also"])) & set(labels["quiet"])
    assert not both, f"a rule both expected and quiet: {both}"
    labels["also"] = sorted(set(labels["also"]) - set(labels["expected"]))
    (out / "labels.json").write_text(json.dumps(rounded(labels), indent=1, allow_nan=True) + "\n")
