"""ClassImbalance: labels dominated by some classes, or a class mostly mispredicted."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_bool, parse_float, parse_int, parse_regex
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._labels import class_ids, natural_key, require_class_labels
from rules_builtin.registry import register

__all__ = ["ClassImbalance"]

_CHARTED_CLASSES = 30  # classes charted one line each (the report's curves)


def _add(counts: Counter[int], values: np.ndarray) -> None:
    """Count each value of ``values`` (whole numbers) into ``counts``."""
    ids = values.astype(np.int64)
    if ids.size <= _SMALL:  # a batch's labels: counting the list beats sorting it
        counts.update(ids.tolist())
        return
    classes, found = np.unique(ids, return_counts=True)
    for cls, n in zip(classes.tolist(), found.tolist()):
        counts[cls] += n


_SMALL = 4096


def _class_scores(predictions: np.ndarray, labels: int) -> bool:
    """Whether ``predictions`` are per-class scores for ``labels`` samples (Keras saves the
    softmax output, shape (samples, classes)): then they are reduced by argmax whatever
    ``argmax`` says, since scores read as class ids would be nonsense."""
    return (
        predictions.ndim >= 2
        and predictions.shape[-1] > 1
        and predictions.size == labels * predictions.shape[-1]
    )


@register
class ClassImbalance(Rule):
    """Fires at a step when, counting every label seen so far, at least ``samples`` labels
    have been seen and either

    * the largest class count / the smallest class count > ``threshold_imbalance``, or
    * for some *underrepresented* class, the share of its samples whose prediction is another
      class > ``threshold_misprediction`` (AWS: "mispredictions for underrepresented
      classes"). A class is underrepresented when it has at most half the labels of the
      largest class; on balanced data no class is, so an untrained model's first predictions
      do not fire.

    Choices:

    * Labels are the tensors saved at the step whose names match ``labels_regex``
      (``re.search``), predictions those matching ``predictions_regex``; the i-th labels tensor
      is paired with the i-th predictions tensor, both in natural name order (``labels_2``
      before ``labels_10``).
    * Counts accumulate over every evaluated step since the rule started; nothing is reset.
      (XGBoost saves the same validation labels at each step: repeating them leaves both
      ratios unchanged.)
    * Classes are the label values seen at least once: a class that never appears is unknown,
      so one class alone never counts as imbalanced.
    * Label values are rounded to integers; a labels tensor with two or more axes whose last
      axis has more than one entry (one-hot) is reduced by argmax over that axis. Labels with
      continuous values (a regression's targets) end the run with "Insufficient
      information": rounded to classes, they would fire on every healthy regression.
      ``argmax=True`` reduces predictions by argmax over their last axis (per-class scores);
      otherwise predictions are class ids, rounded (binary probabilities split at 0.5),
      except per-class scores, one row of ``classes`` entries per label (Keras saves its
      softmax output so), which are always reduced by argmax.
    * A labels/predictions pair of different lengths only counts labels (with a warning).
    * A step where no tensor matches ``labels_regex`` is skipped (``TensorUnavailableForStep``).
    """

    PARAMETERS = (
        Param(
            "threshold_imbalance",
            "10",
            "float",
            "Fire when the largest class count / the smallest class count is above this.",
        ),
        Param(
            "threshold_misprediction",
            "0.7",
            "float",
            "Fire when a class's share of mispredicted samples is above this.",
        ),
        Param(
            "samples", "500", "int", "Labels to see (in total, since the start) before evaluating."
        ),
        Param(
            "argmax",
            "False",
            "bool",
            "Reduce predictions by argmax over their last axis (per-class scores).",
        ),
        Param("labels_regex", ".*labels", "str", "Regex of the labels tensors."),
        Param("predictions_regex", ".*predictions", "str", "Regex of the predictions tensors."),
    )

    def __init__(
        self,
        base_trial: Any,
        threshold_imbalance: str | float = "10",
        threshold_misprediction: str | float = "0.7",
        samples: str | int = "500",
        argmax: str | bool = "False",
        labels_regex: str = ".*labels",
        predictions_regex: str = ".*predictions",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.threshold_imbalance = parse_float(name, "threshold_imbalance", threshold_imbalance)
        self.threshold_misprediction = parse_float(
            name, "threshold_misprediction", threshold_misprediction
        )
        self.samples = parse_int(name, "samples", samples, minimum=1)
        self.argmax = parse_bool(name, "argmax", argmax)
        self.labels_regex = parse_regex(name, "labels_regex", labels_regex)
        self.predictions_regex = parse_regex(name, "predictions_regex", predictions_regex)
        self.label_counts: Counter[int] = Counter()
        self.compared: Counter[int] = Counter()  # per class: labels paired with a prediction
        self.mispredicted: Counter[int] = Counter()
        self._counted_steps: set[int] = set()

    def selection_hints(self) -> list[SelectionHint]:
        pattern = self.labels_regex.pattern
        seen = sum(self.label_counts.values())
        if seen:  # labels found, too few to judge
            return [
                SelectionHint(
                    f"labels_regex {pattern!r} ({seen} labels seen, fewer than samples="
                    f"{self.samples})",
                    (pattern,),
                    None,
                    "lower samples, or save the labels at more steps",
                )
            ]
        return [
            SelectionHint(
                f"labels_regex {pattern!r}",
                (pattern,),
                "labels_regex",
                "save the true labels (and predictions_regex's predictions): XGBoost's hook saves "
                "the labels and predictions collections when given validation_data; a "
                "deep-learning hook needs a collection holding the labels tensor",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        names = self.base_trial.tensor_names(step=step)
        # matching(): the answers per name are remembered, one lookup for all the names.
        labels = sorted(self.labels_regex.matching(names), key=natural_key)
        if not labels:
            raise TensorUnavailableForStep(self.labels_regex.pattern, step)
        predictions = sorted(self.predictions_regex.matching(names), key=natural_key)
        if step not in self._counted_steps:  # never count a step twice
            self._counted_steps.add(step)
            for i, label_name in enumerate(labels):
                pred_name = predictions[i] if i < len(predictions) else None
                self._count(step, label_name, pred_name)
            if len(self.label_counts) <= _CHARTED_CLASSES:  # the curve behind the verdict
                for cls, count in sorted(self.label_counts.items()):
                    self.evidence.record(
                        step, f"class {cls}", quantity="labels seen per class", value=count
                    )
        return self._violation(step, labels, predictions[: len(labels)])

    def _count(self, step: int, label_name: str, pred_name: str | None) -> None:
        raw = self.base_trial.tensor(label_name).value(step)
        require_class_labels(self.rule_name, step, label_name, raw)
        y = class_ids(raw)
        finite = np.isfinite(y)
        _add(self.label_counts, y[finite])
        if pred_name is None:
            return
        scores = np.asarray(self.base_trial.tensor(pred_name).value(step))
        p = class_ids(scores, argmax=self.argmax or _class_scores(scores, y.size))
        if p.size != y.size:
            self.logger.warning(
                "%s: step %d: %s has %d values but %s has %d; mispredictions not counted",
                self.rule_name,
                step,
                label_name,
                y.size,
                pred_name,
                p.size,
            )
            return
        both = finite & np.isfinite(p)
        truth = y[both].astype(np.int64)
        wrong = truth[p[both].astype(np.int64) != truth]
        _add(self.compared, truth)
        _add(self.mispredicted, wrong)

    def _violation(self, step: int, labels: list[str], predictions: list[str]) -> bool:
        """Whether the counts so far break a threshold; each comparison is recorded, against
        the step's labels (and, for mispredictions, predictions) tensors."""
        seen = sum(self.label_counts.values())
        if seen < self.samples:
            return False
        if len(self.label_counts) >= 2:
            ((big, most),) = self.label_counts.most_common(1)
            small, least = min(self.label_counts.items(), key=lambda kv: (kv[1], kv[0]))
            ratio = most / least
            if self.evidence.compare(
                step,
                labels,
                quantity="largest / smallest class count ratio",
                value=ratio,
                parameter="threshold_imbalance",
                threshold=self.threshold_imbalance,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: class {big} has {most} labels and class "
                    f"{small} {least} (ratio {ratio:.4g} > threshold_imbalance "
                    f"{self.threshold_imbalance:g}) at {step_words(self.base_trial, step)}"
                ),
            ):
                return True
        largest = max(self.label_counts.values(), default=0)
        for cls in sorted(self.compared):
            if self.label_counts[cls] * 2 > largest:
                continue  # not underrepresented
            share = self.mispredicted[cls] / self.compared[cls]
            if self.evidence.compare(
                step,
                labels + predictions,
                quantity=f"share of class {cls} samples mispredicted",
                value=share,
                parameter="threshold_misprediction",
                threshold=self.threshold_misprediction,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: class {cls}: {share:.4g} of its samples "
                    f"mispredicted > threshold_misprediction "
                    f"{self.threshold_misprediction:g} at {step_words(self.base_trial, step)}"
                ),
            ):
                return True
        return False
