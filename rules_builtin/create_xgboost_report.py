"""CreateXgboostReport: a self-contained HTML report of an XGBoost training job. Never fires.

The report (``<output_dir>/xgboost_report.html``) has the metrics over
steps, the feature importance at the last step that saved it, the class distribution and
confusion matrix (or, for regression, residuals) at the last step that saved labels, and the
hyperparameters; a section lists what the trial did not hold and how to save it. Tables and
inline SVG charts are drawn here: no JavaScript, no files besides the report.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, SMDebugError
from evaluator.fileio import write_atomically
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.rule import Rule
from rules_builtin._labels import natural_key
from rules_builtin._xgboost_report_html import METRIC_NAME, ReportData, render_report
from rules_builtin.registry import register

__all__ = ["DEFAULT_OUTPUT_DIR", "CreateXgboostReport", "ReportData", "render_report"]

DEFAULT_OUTPUT_DIR = "/opt/ml/processing/output/rule"
REPORT_NAME = "xgboost_report.html"
IGNORED_DIR = ".sagemaker-ignore"  # SageMaker does not upload it: temporary files go there
REWRITE_SECONDS = 30.0  # while catching up with old steps, rewrite at most this often


@register
class CreateXgboostReport(Rule):
    """Never fires. At each step it gathers metrics (tensors of the ``metrics`` collection and
    scalars named ``<data set>-<metric>`` such as ``validation-rmse``), feature importances
    (``feature_importance/<type>/<feature>``), labels and predictions (the tensors ``labels``
    / ``predictions``, else those of the collections of the same names) and hyperparameters
    (``hyperparameters/<name>``), and rewrites the report atomically (a temporary file in
    ``<output_dir>/.sagemaker-ignore`` renamed over it).

    It writes at the first step, at every step that has caught up with the newest saved step,
    and otherwise at most every ``REWRITE_SECONDS`` while replaying old steps; ``write_report``
    writes it at once (the evaluator can call it when the rule ends). Labels are a
    classification when they are whole numbers (or one-hot rows) of at most 50 classes; the
    report then shows the class distribution and the confusion matrix (``Confusion``'s
    conventions), else label/prediction statistics and a residual histogram.

    ``output_dir`` is not a SageMaker parameter: the evaluator passes its rule output folder.

    Evidence: a report writer makes no comparison; the tensors whose values went into the
    report count as checked at their step. A trial holding none of the above (a deep-learning
    trial) gives it nothing to report on: the report says so, and the evaluator ends the rule
    with InsufficientInformationForRuleInvocation rather than NoIssuesFound.
    """

    PARAMETERS = (
        Param(
            "output_dir",
            None,
            "str",
            "Folder the report goes to, under CreateXgboostReport/; default "
            f"{DEFAULT_OUTPUT_DIR} (the evaluator sets its rule output folder).",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        output_dir: str | os.PathLike[str] | None = None,
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        given = str(output_dir).strip() if output_dir is not None else ""
        self.output_dir = Path(given or DEFAULT_OUTPUT_DIR)
        # SageMaker uploads the rule's output folder to rule-output/<RuleConfigurationName>/,
        # so the report sits directly in it: rule-output/CreateXgboostReport/xgboost_report.html.
        self.report_path = self.output_dir / REPORT_NAME
        self.data = ReportData(
            str(getattr(base_trial, "name", base_trial)), str(getattr(base_trial, "path", ""))
        )
        self._metrics = TensorSelection(self.rule_name, "metrics", all_when_empty=False)
        self._labels = TensorSelection(self.rule_name, "labels", all_when_empty=False)
        self._predictions = TensorSelection(self.rule_name, "predictions", all_when_empty=False)
        self._last_write: float | None = None

    def selection_hints(self) -> list[SelectionHint]:
        return [
            SelectionHint(
                "XGBoost's tensors (metrics, feature_importance/<type>/<feature>, labels, "
                "predictions, hyperparameters/<name>)",
                ("metrics", "feature_importance", "labels", "predictions", "hyperparameters"),
                None,
                "CreateXgboostReport reports on an XGBoost training job: save the metrics, "
                "feature_importance, labels, predictions and hyperparameters collections with the "
                "XGBoost hook; a deep-learning trial holds none of them",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        if not self.data.steps or step > self.data.steps[-1]:
            self._collect(step)
        if self._due(step):
            self.write_report()
        return False

    def on_evaluation_end(self) -> None:
        """Called by the evaluator when the data ends: the final report."""
        self.write_report()

    def write_report(self) -> Path:
        """Render the report from what was gathered so far and write it; its path."""
        self.data.training_ended = getattr(self.base_trial, "loaded_all_steps", None)
        text = render_report(self.data, generated=datetime.now(UTC))
        try:
            write_atomically(
                self.report_path, text.encode("utf-8"), tmp_dir=self.output_dir / IGNORED_DIR
            )
        except OSError as e:
            raise ConfigurationError(
                f"{self.rule_name} cannot write its report to {self.report_path}: {e}; the "
                "rule output folder (output_dir) must be a writable folder"
            ) from e
        self._last_write = time.monotonic()
        return self.report_path

    def _due(self, step: int) -> bool:
        if self._last_write is None:
            return True
        newest = getattr(self.base_trial, "newest_step", lambda: None)()
        return (
            newest is None
            or step >= newest
            or time.monotonic() - self._last_write >= REWRITE_SECONDS
        )

    # ---------------------------------------------------------------- gathering

    def _collect(self, step: int) -> None:
        data, trial = self.data, self.base_trial
        data.steps.append(step)
        names = set(trial.tensor_names(step=step))
        metric_names = set(self._metrics.names(trial, step=step))
        importance: dict[str, dict[str, float]] = {}
        used: list[str] = []  # the tensors whose values go into the report
        for name in sorted(names, key=natural_key):
            head, _, rest = name.partition("/")
            kind, _, feature = rest.partition("/")
            if head == "feature_importance" and kind and feature:
                value = self._scalar(name, step)
                if value is not None:
                    importance.setdefault(kind, {})[feature] = value
                    used.append(name)
            elif head == "hyperparameters" and rest:
                if rest not in data.hyperparameters:
                    value_text = self._text(name, step)
                    if value_text is not None:
                        data.hyperparameters[rest] = value_text
                        used.append(name)
            elif name in metric_names or METRIC_NAME.match(name):
                value = self._scalar(name, step)
                if value is not None:
                    data.metrics.setdefault(name, []).append((step, value))
                    used.append(name)
        if importance:
            data.importance, data.importance_step = importance, step
        labels = self._arrays(step, names, "labels", self._labels)
        if labels:
            data.labels, data.labels_step = [a for _, a in labels], step
            used += [n for n, _ in labels]
        predictions = self._arrays(step, names, "predictions", self._predictions)
        if predictions:
            data.predictions, data.predictions_step = [a for _, a in predictions], step
            used += [n for n, _ in predictions]
        if used:
            self.evidence.checked(step, used)

    def _read(self, name: str, step: int) -> np.ndarray | None:
        try:
            return np.asarray(self.base_trial.tensor(name).value(step))
        except (SMDebugError, ValueError) as e:
            if len(self.data.unreadable) < 20:
                self.data.unreadable.append(f"{name} at step {step}: {e}")
            return None

    def _scalar(self, name: str, step: int) -> float | None:
        value = self._read(name, step)
        if value is None or value.size != 1 or value.dtype.kind not in "biuf":
            return None
        return float(value.ravel()[0])

    def _text(self, name: str, step: int) -> str | None:
        value = self._read(name, step)
        if value is None:
            return None
        items = [str(v) for v in value.ravel().tolist()]
        return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"

    def _arrays(
        self, step: int, names: set[str], name: str, selection: TensorSelection
    ) -> list[tuple[str, np.ndarray]]:
        """The usable (name, value) pairs of the tensor ``name``, else of ``selection``."""
        chosen = (
            [name]
            if name in names
            else sorted(selection.names(self.base_trial, step=step), key=natural_key)
        )
        found = [(n, self._read(n, step)) for n in chosen]
        return [(n, a) for n, a in found if a is not None and a.dtype.kind in "biuf" and a.size]


# -------------------------------------------------------------------- rendering
