"""When each built-in rule can tell: what it reads per framework, the windows it waits for and
the earliest step it can fire, with default parameters. Rendered into each rule's section of
docs/rules.md (``rules_builtin._describe``); measured lags: bench/DETECTION.md.

Steps are a trial's saved steps of the mode named (a mode step counts only that mode's saves).
"Keras" means smdebug's KerasHook with the ``layers`` collection (``<layer>/inputs`` and
``/outputs``, ``<layer>/weights/...``); "PyTorch" smdebug's Hook with a user collection of
module tensors (``<module>_input_<n>`` / ``_output_<n>``); "XGBoost" its hook's collections.
"""

from __future__ import annotations

__all__ = ["DETECTION", "Detection"]

Detection = tuple[str, str, str]  # (reads per framework, windows, earliest firing)

_EVERY_STEP = "none: each step is judged on its own values"
_AT_ONCE = "the first saved step holding the fault"
_SELECTED = "Any framework: the tensors of collection_names / tensor_regex"

DETECTION: dict[str, Detection] = {
    "AllZero": (_SELECTED + " (required).", _EVERY_STEP, _AT_ONCE),
    "CheckInputImages": (
        "PyTorch: the root module's input (Net_input_0); MXNet: hybridsequential0_input_0; "
        "Keras: set regex to the first layer's <layer>/inputs.",
        "running per-channel sums over every image seen",
        "the first step by which threshold_samples (500) images have been seen",
    ),
    "ClassImbalance": (
        "XGBoost: labels / predictions; Keras: the labels and predictions the train step "
        "logs; any tensors matching labels_regex / predictions_regex.",
        "counts accumulate over every step seen",
        "the first step by which samples (500) labels have been seen",
    ),
    "Confusion": (
        "labels / predictions tensors or collections (XGBoost, Keras train-step logs).",
        "3 consecutive evaluations of one mode out of bounds without the worst recall "
        "rising by 0.01; else the newest evaluation when the data ends",
        "the third saved evaluation (step with labels and predictions) of a mode",
    ),
    "CreateXgboostReport": (
        "XGBoost: metrics, feature importance, labels, predictions.",
        "none",
        "never fires (a report)",
    ),  # fmt: skip
    "DeadRelu": (
        "Keras: ReLU layer outputs, Dense(activation='relu') outputs (or relu(inputs @ kernel "
        "+ bias) when only its inputs and weights are saved); PyTorch: every call's "
        "<relu>_output_<n>; SageMaker's .*relu_output and a relu_output collection.",
        _EVERY_STEP,
        _AT_ONCE + " (a layer initialised dead: step 0)",
    ),
    "ExplodingTensor": (
        "Any framework: every tensor (XGBoost's trees/* excepted), or the selection.",
        _EVERY_STEP,
        "the first saved step holding a NaN / inf",
    ),  # fmt: skip
    "FeatureImportanceOverweight": (
        "XGBoost: feature_importance/weight/<feature>.",
        _EVERY_STEP + " (steps whose model uses <= nfeatures features are not compared)",
        "the first saved step whose trees use more than nfeatures (3) features",
    ),
    "GradientNormSpike": (
        "Hugging Face: train/grad_norm; Lightning: grad_2.0_norm_total; smdebug (Keras, "
        "PyTorch): the global L2 norm of the gradients collection, TRAIN steps.",
        "the last 20 logged values (median) and the last 50 (noise), values, not steps",
        "the 7th logged norm (5 skipped, 2 in a row above the bound); lag 1 logged value",
    ),
    "LearningRateSchedule": (
        "Hugging Face: train/learning_rate; Lightning: lr-<optimizer>; Keras: "
        "epoch_learning_rate; any framework: a scalar named like a learning rate, TRAIN.",
        "patience (2) logged values in a row at 0; the previous value for a rise",
        "the second logged value at 0; a NaN at once",
    ),
    "LossNotDecreasing": (
        "Keras: loss (its per-epoch running mean) and val_loss; PyTorch: the registered loss "
        "module's output; XGBoost: its losses collection (train-/validation- metrics).",
        "num_steps (10) mode steps between compared values; on a noisy loss the comparison "
        "value is the mean of the num_steps mode steps ending there, and the window before it "
        "says whether a fall goes on (the evidence says which decided)",
        "mode step num_steps (10); a plateau at the first evaluation (every num_steps) whose "
        "anchor lies on it, up to two windows later on a noisy loss that fell before it",
    ),
    "LossSpike": (
        "Hugging Face: train/loss; Keras: loss (TRAIN); PyTorch: the registered loss "
        "module's output; any framework: the losses collection, TRAIN.",
        "the last 5 logged values (median) and the last 50 (noise), values, not steps",
        "the 9th logged value (5 skipped, 3 in a row above the bound); lag 2 logged values",
    ),
    "NLPSequenceRatio": (
        "Embedding inputs: .*embedding0_input_0, PyTorch emb*_input_0, Keras embedding/inputs.",
        _EVERY_STEP,
        _AT_ONCE,
    ),  # fmt: skip
    "NonFiniteValues": (
        "Any framework: the losses, gradients and metrics collections and learning rates, "
        "every mode; Hugging Face: train/loss beside train/grad_norm for a masked NaN.",
        _EVERY_STEP,
        "the first saved step holding a NaN / inf, or a 0.0 loss beside one",
    ),
    "Overfit": (
        "The losses collection in TRAIN and EVAL mode (Keras: loss / val_loss at epoch ends).",
        "a complete validation pass against the training phase before it; patience (1) passes",
        "the first step after the first complete validation pass",
    ),
    "Overtraining": (
        "The losses collection in TRAIN and EVAL mode (Keras: epoch-end logs once seen; "
        "XGBoost: train-/validation- metrics).",
        "moving means of ceil(patience / 2) values (3 TRAIN, 5 EVAL; Keras epoch ends: 1)",
        "patience_train (5) TRAIN values / patience_validation (10) EVAL values after the "
        "best, counted from the first full moving mean",
    ),
    "PoorWeightInitialization": (
        "Keras: ReLU layer inputs, Dense(activation='relu') inputs @ kernel + bias; PyTorch: "
        "<relu>_input_<n>; gradients and losses collections. Only the first steps (10) "
        "TRAIN steps.",
        "variances and gradient spread: none; loss: patience (5) steps (a noisy loss: two "
        "windows of 5)",
        "step 0 (variances, gradients); TRAIN step patience (5) for a stuck loss (9 if noisy)",
    ),
    "SaturatedActivation": (
        "Keras: tanh/sigmoid layer inputs, Dense(activation=f) inputs @ kernel + bias; "
        "PyTorch: every call's <tanh|sigmoid>_input_<n>; SageMaker's .*tanh_input / "
        ".*sigmoid_input and collections so named.",
        _EVERY_STEP,
        _AT_ONCE,
    ),
    "SimilarAcrossRuns": (
        "Any framework: the selection, in the base and the other trials.",
        _EVERY_STEP,
        "the first mode step where a value differs",
    ),  # fmt: skip
    "StalledTrainingRule": (
        "Any trial: the arrival of new steps.",
        "threshold (1800) seconds of wall-clock time",
        "threshold seconds after the newest step",
    ),  # fmt: skip
    "TensorVariance": (_SELECTED + "; all tensors without them.", _EVERY_STEP, _AT_ONCE),
    "ThroughputDrop": (
        "Hugging Face: eval/samples_per_second, train_samples_per_second; Lightning: "
        "ThroughputMonitor's *_per_sec; any scalar named like a throughput, every mode.",
        "the running median of the last 20 logged values that were not low",
        "the 6th logged value (3 before the first check, 3 low in a row); lag 2 values",
    ),
    "TreeDepth": ("XGBoost: trees/Node.", _EVERY_STEP, "the first saved round's tree"),
    "UnchangedTensor": (
        "Any framework: weights, biases, gradients and losses (TRAIN steps), or the selection.",
        "num_steps (3) saved TRAIN steps",
        "the num_steps-th (3rd) saved TRAIN step",
    ),
    "VanishingGradient": (
        "Any framework: the gradients collection (Keras: the train step's logged gradients).",
        _EVERY_STEP,
        "the second saved step (step 0 is never judged)",
    ),  # fmt: skip
    "WeightUpdateRatio": (
        "Any framework: the weights collection, TRAIN steps.",
        "the previous saved TRAIN step (or num_steps TRAIN steps back)",
        "the second saved TRAIN step",
    ),
}
