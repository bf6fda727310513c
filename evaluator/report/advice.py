"""What to try after a rule fires: a short next step per built-in rule, in our own words, shown
in the report beside the evidence that led to it. Keyed by rule class name; a rule of one's
own gets the general advice. The report knows no rule's code: only these names."""

from __future__ import annotations

__all__ = ["CURVES", "GENERAL", "VALIDATION", "Step", "advice_for"]

# What a step of advice refers to on the page: it is given only when the page shows it.
CURVES = "curves"  # a chart of what the rule watched (the curves behind the verdict)
VALIDATION = "validation"  # a validation (EVAL) curve among them

Step = str | tuple[str, str]  # a step of advice, or (what it needs shown, the step)

GENERAL: tuple[Step, ...] = (
    (
        CURVES,
        "Open the curves below at the firing step: find which tensor moved first, and whether "
        "it coincides with a change in the data, the learning rate schedule or the batch size.",
    ),
    "Look at the training job's log around the firing step: a change in the data, the "
    "learning rate schedule or the batch size there is the first suspect.",
)

_ADVICE: dict[str, tuple[Step, ...]] = {
    "VanishingGradient": (
        "Gradients this small stop the early layers from learning.",
        "Switch saturating activations (sigmoid, tanh) to ReLU-like ones, or add batch or "
        "layer normalisation.",
        "Use an initialisation matched to the activation (He for ReLU, Glorot for tanh).",
        "For deep or recurrent networks add residual connections or use LSTM/GRU cells; "
        "raise the learning rate only if the loss is flat as well.",
    ),
    "ExplodingTensor": (
        "A tensor became NaN or infinite, so the update that produced it is lost.",
        "Lower the learning rate (try 3-10x lower) or add a warm-up.",
        "Clip gradients by global norm (for example 1.0).",
        "Look for a log or division of zero in the loss, and for bad input values (check the "
        "data loader); with mixed precision, use loss scaling.",
    ),
    "WeightUpdateRatio": (
        "The size of each update relative to the weights is off (around 1e-3 is usual).",
        "Too large: lower the learning rate or clip gradients. Too small: raise the learning "
        "rate, or check that the layer is not frozen and that weight decay is not too strong.",
    ),
    "PoorWeightInitialization": (
        "The spread of activations or weights across layers is uneven from the start.",
        "Use He (ReLU) or Glorot (tanh, sigmoid) initialisation, or add normalisation layers.",
    ),
    "DeadRelu": (
        "Many ReLU units output zero for every input and no longer learn.",
        "Lower the learning rate, use LeakyReLU/ELU/GELU, initialise with He, and add batch "
        "normalisation before the activation.",
    ),
    "SaturatedActivation": (
        "Sigmoid or tanh units sit at their limits, where the gradient is near zero.",
        "Normalise the inputs, add batch or layer normalisation, lower the learning rate, or "
        "use ReLU-like activations.",
    ),
    "TensorVariance": (
        "A tensor's variance left its expected range.",
        "Very large: lower the learning rate or clip gradients. Very small: check the "
        "initialisation and that the layer receives gradients.",
    ),
    "AllZero": (
        "A tensor is entirely zero.",
        "Check that the layer is connected to the loss and not frozen, that the input batch "
        "is not empty or zero-filled (check the data loader), and the hook's tensor selection.",
    ),
    "UnchangedTensor": (
        "A tensor stopped changing between steps.",
        "Check that its variables are trainable and in the optimizer, that the learning rate "
        "is not zero (a schedule that decayed), and that gradients reach it.",
    ),
    "LossNotDecreasing": (
        "The loss stopped falling.",
        "Flat from the start (the run is not learning): raise the learning rate, or check "
        "the labels and the data loader.",
        "Flat after a fall (the model converged): lower the learning rate (a schedule) or "
        "stop early.",
        (
            VALIDATION,
            "Look at the validation curve in the loss chart below: flat too, the training "
            "loss tells which of the two; rising while the training loss falls, the model "
            "overfits (stop early, add regularisation).",
        ),
    ),
    "Overfit": (
        "The validation loss moved away from the training loss.",
        "Stop early at the best validation step, add regularisation (dropout, weight decay), "
        "augment or add data, or use a smaller model.",
    ),
    "Overtraining": (
        "The loss has not improved for many steps.",
        "Stop training here (keep the checkpoint of the best validation step), or lower the "
        "learning rate if the training loss is still noisy.",
    ),
    "StalledTrainingRule": (
        "No new training step was saved for too long.",
        "Look at the training job's logs for a hang (data loading, a deadlock between "
        "workers, a full disk) and check the hook's save interval.",
    ),
    "ClassImbalance": (
        "Some classes are far rarer than others in the labels.",
        "Resample or reweight the classes (class weights in the loss), augment the rare "
        "classes, and judge the model by per-class metrics, not accuracy.",
    ),
    "Confusion": (
        "The model confuses some classes (the confusion matrix is off its diagonal).",
        "Look at the pairs that are confused: check their labels, add examples of them, or "
        "weight them in the loss.",
    ),
    "CheckInputImages": (
        "The input images are not normalised.",
        "Scale pixel values (to 0..1 or by mean and standard deviation) in the data loader.",
    ),
    "NLPSequenceRatio": (
        "Too many tokens are padding or unknown.",
        "Bucket sequences by length or lower the maximum length; grow the vocabulary or check "
        "the tokenizer.",
    ),
    "TreeDepth": (
        "The trees are shallower than the depth allowed, or than useful.",
        "Check max_depth and min_child_weight, and whether the features carry signal.",
    ),
    "FeatureImportanceOverweight": (
        "A few features carry almost all of the importance.",
        "Check those features for leakage of the label; try feature subsampling "
        "(colsample_bytree) or removing them to see what the model learns without.",
    ),
    "SimilarAcrossRuns": (
        "A tensor differs between the two runs.",
        "Compare the runs' seeds, data order and hyperparameters; differences in the first "
        "steps point at initialisation or data.",
    ),
    "LossSpike": (
        "The training loss jumped far above its recent level for several logged values.",
        "A spike that came back (transient): look at the batches of those steps (corrupt or "
        "unusual samples); if spikes recur, lower the peak learning rate or lengthen the "
        "warm-up.",
        "A spike that did not come back (diverging): restart from a checkpoint before it with "
        "a lower learning rate, gradient clipping (global norm 1.0), or a smaller Adam beta2.",
    ),
    "GradientNormSpike": (
        "The gradient norm jumped far above its recent level for several logged values.",
        "Clip gradients by global norm; lower the learning rate or lengthen the warm-up.",
        "With mixed precision, check the loss scale; look at the batches of those steps.",
    ),
    "NonFiniteValues": (
        "A loss, gradient norm, learning rate or metric became NaN or infinite (or a NaN loss "
        "was logged as 0.0).",
        "Lower the learning rate or add a warm-up; clip gradients by global norm.",
        "With fp16, use dynamic loss scaling or bf16; look for a log or division of zero in "
        "the loss and for bad input values.",
    ),
    "LearningRateSchedule": (
        "The learning rate is not what the schedule should give: 0 (nothing is learnt), NaN, "
        "or rising when it should not.",
        "Check the scheduler's total and warm-up steps against the run's real length (epochs "
        "x steps per epoch / gradient accumulation) and that it is stepped once per update.",
    ),
    "ThroughputDrop": (
        "Training or evaluation became much slower than it had been.",
        "Check the data loading (workers, remote storage), the machine (thermal throttling, "
        "another job on the device) and the cost of checkpointing or logging at those steps.",
    ),
}


def advice_for(rule: str, shown: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """What the ``rule`` (class name) firing means, then what to try; the general advice for
    a rule of one's own. A step that refers to a part of the page (``CURVES``,
    ``VALIDATION``) is given only when ``shown`` holds it; of the general advice, the first
    step that can be given."""
    found = _ADVICE.get(rule)
    if found is None:
        given = [_text(step) for step in GENERAL if _fits(step, shown)]
        return ("", given[0])
    return tuple(_text(step) for step in found if _fits(step, shown))


def _fits(step: Step, shown: frozenset[str]) -> bool:
    return isinstance(step, str) or step[0] in shown


def _text(step: Step) -> str:
    return step if isinstance(step, str) else step[1]
