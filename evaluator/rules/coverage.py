"""A rule that checked nothing: the error that replaces a vacuous ``NoIssuesFound``.

When the data has ended and a rule compared no tensor (a built-in rule's selection matched
nothing, the collection it needs is empty or absent, its comparisons never had enough history)
or, for a rule that records no comparisons, read no tensor value, its verdict would say
nothing about the training job. ``nothing_checked_error`` builds smdebug's
``InsufficientInformationForRuleInvocation`` for it, naming what matched nothing, what the trial
does hold (collections with counts, the closest tensor names) and which parameter to set.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

from evaluator.errors import InsufficientInformationForRuleInvocation
from evaluator.rules.evidence import Evidence, SelectionHint
from evaluator.rules.invoker import InvokeResult, Termination

__all__ = [
    "MLFLOW_NEEDS",
    "TENSORBOARD_NEEDS",
    "checked_nothing",
    "closest_names",
    "mlflow_advice",
    "nothing_checked_error",
    "suggest_regex",
    "tensorboard_advice",
]

_REGEX_SYNTAX = re.compile(r"\\[dDsSwWb]|[.*+?^$()\[\]{}|\\]")
_MOST_COLLECTIONS = 12


def checked_nothing(rule: Any, result: InvokeResult) -> bool:
    """Whether ``rule``'s run ended with its data (or its step window), never fired, and yet
    checked nothing: its NoIssuesFound would be vacuous. A built-in rule
    (``RECORDS_COMPARISONS``) has checked something when it recorded a comparison; any other
    rule when it read a tensor value; one without our ``evidence`` (it did not call
    ``Rule.__init__``) when it evaluated a step."""
    if result.fired_steps or result.ended_by not in (Termination.END_OF_DATA, Termination.END_STEP):
        return False
    evidence = getattr(rule, "evidence", None)
    if not isinstance(evidence, Evidence):
        return result.steps_evaluated == 0
    records = bool(getattr(rule, "RECORDS_COMPARISONS", False))
    return not evidence.checked_anything(reads_count=not records)


def nothing_checked_error(
    rule: Any, *, steps_visited: int, window: tuple[int, int | None] | None = None
) -> InsufficientInformationForRuleInvocation:
    """The error for ``rule`` that ended without checking anything, after visiting
    ``steps_visited`` saved steps (in the global-step ``window`` [start, end) when one was set)."""
    name = getattr(rule, "rule_name", type(rule).__name__)
    trial = rule.base_trial
    hints = _hints(rule)
    kind = getattr(trial, "kind", None)
    tensorboard = kind == "tensorboard"
    # A rule that knows why it could not compare anything (too few logged values for its
    # windows: rules_builtin._progress.too_few_values) says so instead.
    explain = getattr(rule, "why_nothing_checked", None)
    said = explain() if callable(explain) else None
    parts = [
        said if isinstance(said, str) and said else _what_happened(steps_visited, window, hints)
    ]
    if kind in ("tensorboard", "mlflow"):  # what to log first; smdebug's hook does not apply
        parts.append(tensorboard_advice(name, trial) if tensorboard else mlflow_advice(name))
        hints = [dataclasses.replace(h, advice=None) for h in hints]
    parts.append(_holdings(trial))
    names = _all_names(trial)
    close = closest_names(names, [p for h in hints for p in h.patterns])
    if close:
        parts.append("closest tensor names: " + ", ".join(close))
    advice = _advice(hints, close)
    if advice:
        parts.append(advice)
    if kind in ("tensorboard", "mlflow"):
        parts.append(f"docs/{kind}.md")
    return InsufficientInformationForRuleInvocation(name, "; ".join(parts))


_WEIGHTS_AND_GRADS = (
    "weights and gradients",
    "for name, p in model.named_parameters(): writer.add_histogram(name, p, step); "
    'writer.add_histogram(name + ".grad", p.grad, step)',
)
_ACTIVATIONS = (
    "layer outputs (activations)",
    'writer.add_histogram("relu1/outputs", relu1_output, step)',
)
_LABELS = (
    "labels and predictions as tensors",
    'tf.summary.write("labels", y_true, step=step); '
    'tf.summary.write("predictions", y_pred, step=step)',
)
_VALIDATION_LOSS = (
    "a validation loss beside the training loss (the same tag in a validation folder, or a "
    "tag with a phase word: val_loss, eval/loss, Loss/test)",
    'writer.add_scalar("val_loss", val_loss, step) beside the training "loss"',
)
#: What each built-in rule needs from a TensorBoard log, and one line of logging code that
#: adds it (torch's SummaryWriter or tensorboardX ``writer``; TF where only TF can).
TENSORBOARD_NEEDS: dict[str, tuple[str, str]] = {
    "LossNotDecreasing": (
        "a loss scalar (a tag containing 'loss') at 10 or more steps",
        'writer.add_scalar("loss", loss.item(), step)',
    ),
    "Overfit": _VALIDATION_LOSS,
    "Overtraining": _VALIDATION_LOSS,
    "StalledTrainingRule": ("steps logged while training runs", "writer.flush()"),
    "VanishingGradient": (
        "gradients",
        'writer.add_histogram(name + ".grad", p.grad, step) for each named parameter',
    ),
    "ExplodingTensor": (
        "gradients or losses",
        'writer.add_histogram(name + ".grad", p.grad, step) for each named parameter',
    ),
    "TensorVariance": _WEIGHTS_AND_GRADS,
    "AllZero": _WEIGHTS_AND_GRADS,
    "WeightUpdateRatio": (
        "the weights' values as tensors (a histogram holds their distribution, not each "
        "element's update)",
        "tf.summary.write(name, weight, step=step) for each weight (a tensor summary)",
    ),
    "PoorWeightInitialization": _WEIGHTS_AND_GRADS,
    "UnchangedTensor": _WEIGHTS_AND_GRADS,
    "DeadRelu": _ACTIVATIONS,
    "SaturatedActivation": _ACTIVATIONS,
    "ClassImbalance": _LABELS,
    "Confusion": _LABELS,
    "LossSpike": (
        "a training loss scalar at 9 or more logged steps",
        'writer.add_scalar("train/loss", loss.item(), step)',
    ),
    "GradientNormSpike": (
        "a total gradient norm scalar (or gradient histograms) at 7 or more logged steps",
        'writer.add_scalar("train/grad_norm", clip_grad_norm_(model.parameters(), 1e9), step)',
    ),
    "NonFiniteValues": (
        "losses, gradient norms, learning rates or metrics",
        'writer.add_scalar("train/loss", loss.item(), step)',
    ),
    "LearningRateSchedule": (
        "a learning-rate scalar",
        'writer.add_scalar("train/learning_rate", scheduler.get_last_lr()[0], step)',
    ),
    "ThroughputDrop": (
        "a throughput scalar (samples, tokens or steps per second)",
        'writer.add_scalar("train/samples_per_second", batch_size / seconds, step)',
    ),
}


def tensorboard_advice(rule_name: str, trial: Any = None) -> str:
    """For a TensorBoard log: what ``rule_name`` needs and the logging line that adds it;
    for WeightUpdateRatio on weights logged as histograms, that they cannot tell updates."""
    what, line = TENSORBOARD_NEEDS.get(
        rule_name, ("the tensors the rule reads", "writer.add_scalar(tag, value, step)")
    )
    said = f"this TensorBoard log lacks {what}; log it during training, for example: {line}"
    if rule_name == "WeightUpdateRatio" and trial is not None:
        try:
            logged = sorted(
                set(trial.tensor_names(collection="weights"))
                & set(trial.tensor_names(collection="histograms"))
            )
        except Exception:
            logged = []
        if logged:
            shown = ", ".join(logged[:5]) + (" …" if len(logged) > 5 else "")
            said = (
                f"its weights ({shown}) are logged as histograms, so the update ratio "
                f"||w - w_prev|| / ||w_prev|| cannot be computed; {said}"
            )
    return said


_VALIDATION_KEYS = (
    "val_loss",
    "a validation loss beside the training loss (train_loss and val_loss, or loss and eval_loss)",
)
#: The MLflow metric key each built-in rule reads, and what it needs of it (keys map to
#: tensors as TensorBoard tags do: evaluator.formats.metric_names).
MLFLOW_NEEDS: dict[str, tuple[str, str]] = {
    "LossNotDecreasing": ("loss", "a loss metric (a key containing 'loss') at 10 or more steps"),
    "Overfit": _VALIDATION_KEYS,
    "Overtraining": _VALIDATION_KEYS,
    "LossSpike": ("train_loss", "a training loss at 9 or more logged steps"),
    "GradientNormSpike": ("grad_norm", "a total gradient norm at 7 or more logged steps"),
    "NonFiniteValues": ("loss", "losses, gradient norms, learning rates or metrics"),
    "LearningRateSchedule": ("learning_rate", "a learning rate"),
    "ThroughputDrop": ("samples_per_second", "a throughput (samples, tokens or steps a second)"),
    "ExplodingTensor": ("loss", "losses"),
    "StalledTrainingRule": ("loss", "steps logged while training runs"),
}


def mlflow_advice(rule_name: str) -> str:
    """For an MLflow run: the metric key ``rule_name`` needs, and the line that logs it; for a
    rule that reads tensors, that MLflow holds scalars only."""
    found = MLFLOW_NEEDS.get(rule_name)
    if found is None:
        return (
            f"this MLflow run holds scalar metrics only, and {rule_name} reads tensors (weights, "
            "gradients, activations or labels): log them to TensorBoard or with smdebug's hook"
        )
    key, what = found
    return (
        f"this MLflow run lacks {what}; log the metric key {key!r} during training, for "
        f'example: mlflow.log_metric("{key}", value, step=step)'
    )


def _hints(rule: Any) -> list[SelectionHint]:
    describe = getattr(rule, "selection_hints", None)
    try:
        found = describe() if callable(describe) else []
    except Exception:  # an explanation must never replace the verdict with a crash
        found = []
    return [h for h in found if isinstance(h, SelectionHint)]


def _what_happened(
    steps: int, window: tuple[int, int | None] | None, hints: list[SelectionHint]
) -> str:
    where = ""
    if window is not None and (window[0] or window[1] is not None):
        end = "" if window[1] is None else f" to {window[1]} (exclusive)"
        where = f" between global steps {window[0]}{end}"
    if steps == 0:
        return f"no saved step{where} to evaluate"
    selected = " and ".join(h.description for h in hints)
    what = (
        f"{selected} selected no tensor it could check" if selected else "it read no tensor value"
    )
    return f"it checked nothing at the {steps} saved step(s) it visited{where}: {what}"


def _holdings(trial: Any) -> str:
    try:
        collections = trial.collections()
        counts = {c: len(trial.tensor_names(collection=c)) for c in sorted(collections)}
        total = len(trial.tensor_names())
    except Exception:
        return "the trial's contents could not be listed"
    shown = [f"{c} ({n})" for c, n in list(counts.items())[:_MOST_COLLECTIONS]]
    more = len(counts) - len(shown)
    listed = ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else "none"
    return f"the trial holds {total} tensor(s); collections: {listed}"


def _all_names(trial: Any) -> list[str]:
    try:
        return list(trial.tensor_names())
    except Exception:
        return []


def closest_names(names: list[str], patterns: list[str], most: int = 5) -> list[str]:
    """The tensor names most like ``patterns`` (regexes or words): names sharing a word with
    a pattern first, then by string similarity."""
    words = [w for p in patterns for w in _words(p)]
    if not names or not words:
        return []
    scored = []
    for name in names:
        lower = name.lower()
        shared = sum(1 for w in set(words) if w in lower)
        similarity = max(
            difflib.SequenceMatcher(None, "_".join(_words(p)), lower).ratio() for p in patterns
        )
        scored.append((shared, similarity, name))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    return [n for shared, sim, n in scored[:most] if shared or sim >= 0.5]


def _words(pattern: str) -> list[str]:
    return [
        w for w in re.split(r"[^a-z0-9]+", _REGEX_SYNTAX.sub(" ", pattern.lower())) if len(w) >= 3
    ]


def suggest_regex(name: str) -> str:
    """A regular expression matching ``name`` and its numbered siblings (``relu1/outputs`` ->
    ``relu\\d+/outputs``)."""
    return re.sub(r"\d+", r"\\d+", re.escape(name).replace("\\/", "/"))


def _advice(hints: list[SelectionHint], close: list[str]) -> str:
    parameters = [h.parameter for h in hints if h.parameter]
    said = [h.advice for h in hints if h.advice]
    given = {p for h in hints for p in h.patterns}
    example = suggest_regex(close[0]) if close else None
    if parameters and example is not None and example in given:
        # The selection already names the closest tensor: choosing it again changes nothing.
        said.append(f"{close[0]} is selected already ({parameters[0]}={example}): the rule "
                    "found nothing in it to check")  # fmt: skip
    elif parameters:
        suggestion = (
            f" (for example {parameters[0]}={example})"
            if example is not None and parameters[0].endswith("regex")
            else ""
        )
        said.append(
            f"set {' or '.join(dict.fromkeys(parameters))} to select the tensors to check"
            f"{suggestion}"
        )
    return "; ".join(dict.fromkeys(said))
