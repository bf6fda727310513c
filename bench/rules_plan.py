"""Which built-in rules the ``rules`` workload runs on the performance trial, and with what.

Stdlib only: both sides import it (bench/rules_workload.py under the project's venv and under
smdebug 1.0.34's venv).

The trial (bench/README.md) is 2000 TRAIN steps of 50 float32 tensors of 256 standard-normal
values drawn afresh at every step: ``gradients/layer{0..24}_weight`` (collection
``gradients``) and ``weights/layer{0..24}_weight`` (collection ``weights``). No losses, no
EVAL steps, no activations, images, token ids, labels or XGBoost tensors.

``PLAN`` gives, per rule class name, the RuleParameters (strings, as SageMaker sends them)
chosen so that the rule reads the trial's tensors at every step and, where its logic allows,
fires at some steps and not at others, so that the fired steps are a real check of behaviour.
``SKIP`` names the rules that select nothing on this trial, whatever their parameters, with
the reason. A built-in rule in neither (one added after this plan) runs with its default
parameters, and the report says so.
"""

from __future__ import annotations

# Rule class name -> {"params": {...}, "other_trial": bool, "why": str}
PLAN: dict[str, dict] = {
    "AllZero": {
        "params": {"tensor_regex": ".*"},
        "why": "every tensor, every step (needs collection_names or tensor_regex); "
        "standard-normal values are never zero, so it never fires",
    },
    "CheckInputImages": {
        "params": {
            "regex": "^weights/",
            "channel": "0",
            "threshold_samples": "500",
            "threshold_mean": "0.16",
        },
        "why": "stand-in input: the 25 weights, each a 1-d 'image' of 256 channels (channel=0); "
        "running per-channel means over the steps seen, judged once 500 have been seen; a "
        "channel mean beyond 0.16 fires for a while after step 499, then the means settle",
    },
    "DeadRelu": {
        "params": {"tensor_regex": ".*", "threshold_inactivity": "42"},
        "why": "stand-in ReLU outputs: every tensor, a 1-d tensor being one unit over its 256 "
        "samples; 'dead' when fewer than 42% of the values are positive",
    },
    "ExplodingTensor": {
        "params": {},
        "why": "default: every tensor, every step; no NaN or inf here, so it never fires",
    },
    "NLPSequenceRatio": {
        "params": {
            "tensor_regex": "^gradients/",
            "token_values": "0",
            "token_thresholds_percent": "50",
        },
        "why": "stand-in token ids: the 25 gradients; share of exact zeros, which is 0 here, "
        "so it never fires",
    },
    "PoorWeightInitialization": {
        "params": {"activation_inputs_regex": "^weights/", "threshold": "1.5", "steps": "2000"},
        "why": "every step checked (steps=2000): variance ratio across the 25 weights "
        "(stand-in activation inputs, threshold 1.5) and the 5-95 percentile spread of "
        "the 25 gradients",
    },
    "SimilarAcrossRuns": {
        "params": {},
        "other_trial": True,
        "why": "every tensor against the same trial opened a second time (its creation counts "
        "in the rule's time); identical runs, so it never fires",
    },
    "TensorVariance": {
        "params": {"min_threshold": "0.78", "max_threshold": "1.22"},
        "why": "every tensor; variance of 256 standard-normal values outside [0.78, 1.22]",
    },
    "UnchangedTensor": {
        "params": {"num_steps": "3", "atol": "3.6", "rtol": "0"},
        "why": "every tensor, last 3 saved steps; a wide atol (3.6) so that a tensor counts "
        "as unchanged at some steps",
    },
    "VanishingGradient": {
        "params": {"threshold": "0.72"},
        "why": "the 25 gradients; mean |g| (about 0.8 here) below 0.72",
    },
    "WeightUpdateRatio": {
        "params": {"large_threshold": "1.55"},
        "why": "the 25 weights against the previous step; ||w(s)-w(s-1)|| / ||w(s-1)|| is "
        "about 1.41 for independent draws, fires above 1.55",
    },
}

# Rule class name -> why it is not run on this trial.
SKIP: dict[str, str] = {
    "ClassImbalance": "needs labels and predictions tensors; the trial has none",
    "Confusion": "needs labels and predictions tensors; the trial has none",
    "CreateXgboostReport": "XGBoost report (writes an HTML file); needs XGBoost's tensors",
    "FeatureImportanceOverweight": "needs XGBoost feature_importance tensors; the trial has none",
    "LossNotDecreasing": "checks scalar losses; the trial has no losses collection and no "
    "scalar tensor",
    "Overfit": "compares scalar TRAIN and EVAL losses; the trial has TRAIN steps only and no "
    "scalar tensor",
    "Overtraining": "checks the scalar tensors of the losses collection; the trial has none",
    "SaturatedActivation": "picks tanh or sigmoid thresholds from the tensor name; no tensor "
    "here names either, so it selects nothing whatever the regex",
    "StalledTrainingRule": "reads no tensor: on a finished trial it returns at once at every "
    "step (and it uses Trial methods smdebug lacks: newest_step, "
    "start_polling, loaded_all_steps)",
    "TreeDepth": "needs XGBoost tree tensors; the trial has none",
}


def plan_for(name: str) -> dict:
    """The plan of rule ``name``: params, other_trial, why, and whether it came from PLAN."""
    p = PLAN.get(name)
    if p is None:
        return {
            "params": {},
            "other_trial": False,
            "planned": False,
            "why": "not in bench/rules_plan.py: run with its default parameters",
        }
    return {
        "params": dict(p.get("params") or {}),
        "other_trial": bool(p.get("other_trial")),
        "planned": True,
        "why": p.get("why", ""),
    }
