"""The latest step any documented reading of a rule allows it to fire on a labelled fault
(bench/detection.py's "latest allowed" column), computed from the rule's documented semantics
and the trial's own values, never from the rule's code.

Each rule's readings are stated where they are computed: ``loss_readings`` (LossNotDecreasing,
Overtraining, Overfit) and ``tensor_readings`` (VanishingGradient, WeightUpdateRatio,
ClassImbalance, SaturatedActivation). A reading that never fires leaves the onset as the
bound. Every other labelled rule has no documented window: the onset.
"""

from __future__ import annotations

from typing import Any

from bench.allowed.loss_readings import loss_not_decreasing, overfit, overtraining
from bench.allowed.tensor_readings import (
    class_imbalance,
    saturated_activation,
    vanishing_gradient,
    weight_update_ratio,
)

__all__ = ["NOTES", "latest_allowed", "loss_not_decreasing"]

# What the "latest allowed" column cannot show by itself (figures measured on the trials).
NOTES = [
    "Latest allowed: bench/allowed/ (its docstrings: the readings of each rule's documented "
    "semantics, computed on the trial's values, not the rule's code). VanishingGradient (step "
    "0 skipped in the 2019 notes), WeightUpdateRatio (two saved weight steps), ClassImbalance "
    "(samples), SaturatedActivation (units saturated for the whole batch), Overtraining "
    "(patience counted in values, passes or mode steps) and Overfit (pass, cumulative or Keras "
    "epoch-end means) are bounded by their documented readings; rules whose documents define "
    "no window by the onset itself.",
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
        return overtraining(
            trial,
            onset,
            int(params.get("patience_train", 5)),
            int(params.get("patience_validation", 10)),
            float(params.get("delta", 0.01)),
        )
    if rule == "Overfit":
        return overfit(
            trial,
            onset,
            int(params.get("patience", 1)),
            float(params.get("ratio_threshold", 0.1)),
            int(params.get("start_step", 0)),
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
