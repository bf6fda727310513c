"""The HTML of CreateXgboostReport: ``ReportData`` (what the report shows) and
``render_report`` (tables and embedded charts; no JavaScript, no file besides the report). The
charts and the page's look are the rule report's (``evaluator.report``), so every report of
the evaluator looks alike."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from evaluator.report.charts import line_chart
from evaluator.report.html_charts import bar_chart
from evaluator.report.page import document, escape, number
from rules_builtin._labels import class_ids, confusion_matrix

__all__ = ["METRIC_NAME", "ReportData", "render_report"]

METRIC_NAME = re.compile(r"^[^/\s]+-[^/\s]+$")  # XGBoost's "<data set>-<metric>"

_MAX_CLASSES = 50
_TOP_FEATURES = 20
_IMPORTANCE_ORDER = ("weight", "gain", "cover", "total_gain", "total_cover")


@dataclass
class ReportData:
    """What the report shows, gathered step by step."""

    trial_name: str
    trial_path: str
    training_ended: bool | None = None
    steps: list[int] = field(default_factory=list)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    importance: dict[str, dict[str, float]] = field(default_factory=dict)
    importance_step: int | None = None
    labels: list[np.ndarray] = field(default_factory=list)
    labels_step: int | None = None
    predictions: list[np.ndarray] = field(default_factory=list)
    predictions_step: int | None = None
    hyperparameters: dict[str, str] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


def render_report(data: ReportData, *, generated: datetime) -> str:
    """The whole report as an HTML document."""
    body = [
        _header(data, generated),
        _missing(data),
        _metrics_section(data),
        _importance_section(data),
        _labels_section(data),
        _hyperparameters_section(data),
    ]
    title = f"XGBoost training report: {data.trial_name}"
    return document(title, "\n".join(part for part in body if part))


def _header(data: ReportData, generated: datetime) -> str:
    ended = {True: "yes", False: "not yet", None: "unknown"}[data.training_ended]
    steps = (
        f"{len(data.steps)} (steps {data.steps[0]} to {data.steps[-1]})"
        if data.steps
        else "none yet"
    )
    rows = [
        ("trial", f"<code>{escape(data.trial_name)}</code>"),
        ("path", f"<code>{escape(data.trial_path)}</code>"),
        ("steps read", escape(steps)),
        ("training ended", ended),
        ("generated", escape(generated.isoformat(timespec="seconds"))),
    ]
    table = "".join(f'<tr><th class="name">{k}</th><td class="name">{v}</td></tr>' for k, v in rows)
    return (
        f'<h1>XGBoost training report</h1>\n<table id="summary">{table}</table>\n'
        '<p class="note">Written by the CreateXgboostReport rule, which never fires.</p>'
    )


def _missing(data: ReportData) -> str:
    gaps = []
    if not data.metrics:
        gaps.append(
            "metrics: save the <code>metrics</code> collection and pass evaluation "
            "sets (<code>evals</code>) to <code>xgboost.train</code>"
        )
    if not data.importance:
        gaps.append(
            "feature importance: save the <code>feature_importance</code> collection "
            "(gbtree and dart boosters only)"
        )
    if not data.labels:
        gaps.append(
            "labels: save the <code>labels</code> collection (the hook needs "
            "<code>validation_data</code>)"
        )
    if not data.predictions:
        gaps.append(
            "predictions: save the <code>predictions</code> collection (the hook needs "
            "<code>validation_data</code>)"
        )
    if not data.hyperparameters:
        gaps.append("hyperparameters: save the <code>hyperparameters</code> collection")
    gaps += [f"unreadable: {escape(text)}" for text in data.unreadable]
    if not gaps:
        return ""
    items = "".join(f"<li>{g}</li>" for g in gaps)
    return f'<section id="missing">\n<h2>Not in this trial</h2>\n<ul>{items}</ul>\n</section>'


def _metrics_section(data: ReportData) -> str:
    if not data.metrics:
        return ""
    groups: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for name, points in sorted(data.metrics.items()):
        dataset, _, metric = name.partition("-") if METRIC_NAME.match(name) else (name, "", name)
        groups.setdefault(metric, {})[dataset if metric != name else name] = points
    parts = ['<section id="metrics">\n<h2>Metrics over steps</h2>']
    for metric, series in groups.items():
        parts.append(f"<h3>{escape(metric)}</h3>")
        parts.append(line_chart(series, title=metric))
    rows = []
    for name, points in sorted(data.metrics.items()):
        low = _lowest(points)
        rows.append(
            f'<tr><td class="name">{escape(name)}</td><td>{len(points)}</td>'
            f"<td>{number(points[0][1])}</td><td>{number(points[-1][1])}</td>"
            f"<td>{escape(low)}</td></tr>"
        )
    parts.append(
        '<table class="numbers"><tr><th class="name">metric</th><th>steps</th><th>first</th>'
        f"<th>last</th><th>lowest</th></tr>{''.join(rows)}</table>\n</section>"
    )
    return "\n".join(parts)


def _lowest(points: list[tuple[int, float]]) -> str:
    finite = [(v, s) for s, v in points if np.isfinite(v)]
    if not finite:
        return "n/a"
    value, step = min(finite)
    return f"{number(value)} (step {step})"


def _importance_section(data: ReportData) -> str:
    if not data.importance:
        return ""
    order = [t for t in _IMPORTANCE_ORDER if t in data.importance]
    order += sorted(t for t in data.importance if t not in _IMPORTANCE_ORDER)
    parts = [
        '<section id="feature-importance">\n<h2>Feature importance at step '
        f"{data.importance_step}</h2>"
    ]
    for kind in order:
        scores = sorted(data.importance[kind].items(), key=lambda kv: (-kv[1], kv[0]))
        shown = scores[:_TOP_FEATURES]
        note = f" (the largest {len(shown)} of {len(scores)})" if len(scores) > len(shown) else ""
        parts.append(f"<h3>{escape(kind)}{escape(note)}</h3>")
        parts.append(bar_chart(shown, title=f"feature importance: {kind}"))
    parts.append("</section>")
    return "\n".join(parts)


def _labels_section(data: ReportData) -> str:
    if not data.labels:
        return ""
    head = (
        f'<section id="labels-predictions">\n<h2>Labels and predictions at step '
        f"{data.labels_step}</h2>"
    )
    predictions = data.predictions if data.predictions_step == data.labels_step else []
    if not predictions and data.predictions:
        head += (
            '<p class="note">Predictions were not saved at this step; only the labels '
            "are shown.</p>"
        )
    if _is_classification(data.labels):
        return head + "\n" + _classification(data.labels, predictions) + "\n</section>"
    return head + "\n" + _regression(data.labels, predictions) + "\n</section>"


def _is_classification(labels: list[np.ndarray]) -> bool:
    for array in labels:
        scores = array.ndim >= 2 and array.shape[-1] > 1
        flat = array.astype(np.float64).ravel()
        flat = flat[np.isfinite(flat)]
        if not scores and not (np.all(flat == np.rint(flat)) and np.all(flat >= 0)):
            return False
    ids = np.concatenate([class_ids(a) for a in labels])
    return len(np.unique(ids[np.isfinite(ids)])) <= _MAX_CLASSES


def _classification(labels: list[np.ndarray], predictions: list[np.ndarray]) -> str:
    y = np.concatenate([class_ids(a) for a in labels])
    p = np.concatenate([class_ids(a) for a in predictions]) if predictions else None
    if p is not None and p.size != y.size:
        note = f'<p class="note">{p.size} predictions for {y.size} labels: no confusion matrix.</p>'
        p = None
    else:
        note = ""
    classes, counts = np.unique(y[np.isfinite(y)].astype(np.int64), return_counts=True)
    parts = [
        "<h3>Class distribution</h3>",
        bar_chart(
            [(f"class {c}", float(n)) for c, n in zip(classes, counts)],
            title="labels per class",
            integer=True,
        ),
    ]
    if note:
        parts.append(note)
    if p is None:
        return "\n".join(parts)
    matrix, dropped = confusion_matrix(y, p)
    parts.append("<h3>Confusion matrix</h3>")
    if matrix.shape[0] > _MAX_CLASSES:
        parts.append(f'<p class="note">{matrix.shape[0]} classes: too many to show.</p>')
        return "\n".join(parts)
    if dropped:
        parts.append(f'<p class="note">{dropped} pairs left out (not finite or negative).</p>')
    parts.append(_matrix_table(matrix))
    return "\n".join(parts)


def _matrix_table(matrix: np.ndarray) -> str:
    n = matrix.shape[0]
    head = "".join(f"<th>{j}</th>" for j in range(n))
    rows = []
    for i in range(n):
        total = int(matrix[i].sum())
        cells = []
        for j in range(n):
            share = matrix[i, j] / total if total else 0.0
            color = "#fff" if share > 0.6 else "#222"
            cells.append(
                f'<td style="background:rgba(31,119,180,{share:.2f});color:{color}">'
                f"{int(matrix[i, j])}</td>"
            )
        recall = number(matrix[i, i] / total) if total else "n/a"
        rows.append(f"<tr><th>{i}</th>{''.join(cells)}<td>{total}</td><td>{recall}</td></tr>")
    return (
        '<table class="matrix"><tr><th>true \\ predicted</th>'
        + head
        + "<th>samples</th><th>recall</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _regression(labels: list[np.ndarray], predictions: list[np.ndarray]) -> str:
    y = np.concatenate([a.astype(np.float64).ravel() for a in labels])
    stats = [("labels", y)]
    p = np.concatenate([a.astype(np.float64).ravel() for a in predictions]) if predictions else None
    if p is not None and p.size == y.size:
        stats += [("predictions", p), ("residuals (prediction - label)", p - y)]
    rows = []
    for name, values in stats:
        v = values[np.isfinite(values)]
        cells = [len(v)] + (
            [number(f(v)) for f in (np.mean, np.std, np.min, np.max)] if v.size else ["n/a"] * 4
        )
        rows.append(
            f'<tr><td class="name">{escape(name)}</td>'
            + "".join(f"<td>{c}</td>" for c in cells)
            + "</tr>"
        )
    parts = [
        '<table class="numbers"><tr><th class="name"></th><th>count</th><th>mean</th><th>std</th>'
        f"<th>min</th><th>max</th></tr>{''.join(rows)}</table>"
    ]
    if len(stats) == 3:
        residuals = stats[2][1][np.isfinite(stats[2][1])]
        if residuals.size:
            rmse = float(np.sqrt(np.mean(residuals**2)))
            parts.append(
                f"<p>RMSE {number(rmse)}, mean absolute error "
                f"{number(float(np.mean(np.abs(residuals))))}</p>"
            )
            counts, edges = np.histogram(residuals, bins=20)
            bins = [
                (f"{number(edges[k])} to {number(edges[k + 1])}", float(counts[k]))
                for k in range(len(counts))
            ]
            parts.append("<h3>Residuals</h3>")
            parts.append(bar_chart(bins, title="residual histogram", integer=True))
    elif p is not None:
        parts.append(f'<p class="note">{p.size} predictions for {y.size} labels: no residuals.</p>')
    return "\n".join(parts)


def _hyperparameters_section(data: ReportData) -> str:
    if not data.hyperparameters:
        return ""
    rows = "".join(
        f'<tr><td class="name">{escape(k)}</td><td class="name">{escape(v)}</td></tr>'
        for k, v in sorted(data.hyperparameters.items())
    )
    return (
        '<section id="hyperparameters">\n<h2>Hyperparameters</h2>\n<table><tr>'
        f'<th class="name">name</th><th class="name">value</th></tr>{rows}</table>\n'
        "</section>"
    )


# -------------------------------------------------------------------- SVG charts
