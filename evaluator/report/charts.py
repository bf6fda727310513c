"""Charts for the report pages: interactive charts drawn in the browser by uPlot (MIT, vendored
in ``static/`` with its license, about 50 KB) and our ``static/charts.js``, both inlined into
the page, so a page stays one file that opens from disk and fetches nothing. Python writes
each chart as a JSON spec after an empty ``<div>``; the script draws it. Hover shows the step
and the values, a drag zooms on a range of steps, a double-click shows them all again.

* ``series_chart``: a tested quantity over the steps for one or more tensors, the threshold
  as a dashed line, firing points and the closest approach marked, the tensors that matter
  in colour and the others in grey; a quantity judged at one step only is drawn as bars;
* ``line_chart``: plain lines over the steps (CreateXgboostReport, a rule's curves);
* ``bar_chart``: horizontal bars (HTML and CSS, no script)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.report.page import escape, inline_json

__all__ = [
    "PALETTE",
    "as_float",
    "bar_chart",
    "firing_values",
    "histogram",
    "line_chart",
    "matrix_table",
    "series_chart",
]

PALETTE = ("#1f6fb4", "#e07b00", "#2a9d4b", "#8e44ad", "#c2185b", "#00838f", "#6d4c41")
GREY = "#b9c0c7"
MAX_GREY = 60  # other tensors drawn in grey; more are left out (the caption says so)
MAX_LEGEND = 8
MAX_BARS = 30


def as_float(value: Any) -> float:
    """A number from the JSON files, where NaN and infinities are strings."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, math.nan)
    return math.nan if value is None else float(value)


def _spec(spec: Mapping[str, Any]) -> str:
    text = inline_json(spec)
    return f'<div class="chart"></div><script type="application/json" class="chart-spec">{text}</script>'


def _json_value(value: Any) -> float | str | None:
    """A value for a chart: 6 significant digits (the page shows 4), so a long run's report
    stays small; NaN and infinities as strings."""
    v = as_float(value)
    if math.isfinite(v):
        return float(f"{v:.6g}")
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def _points(points: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [[int(p[0]), _json_value(p[1])] for p in points]


def _finite(points: Sequence[Sequence[Any]]) -> list[float]:
    return [v for p in points if math.isfinite(v := as_float(p[1]))]


def _short(names: Sequence[str], limit: int = 48) -> str:
    text = ", ".join(names)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _use_log(values: Sequence[float]) -> bool:
    return bool(values) and min(values) > 0 and max(values) / min(values) > 1e3


def _number(value: float) -> str:
    return f"{value:.4g}"


def _label(s: Mapping[str, Any]) -> str:
    mode = s.get("mode")
    return _short(s.get("tensors") or [str(s.get("quantity"))]) + (f" [{mode}]" if mode else "")


def _legend(items: Sequence[tuple[str, str, str]]) -> str:
    """Swatches: (colour, css class, text)."""
    return (
        '<p class="legend">'
        + "".join(
            f'<span class="key {cls}"><i style="background:{color}"></i>{escape(text)}</span>'
            for color, cls, text in items
        )
        + "</p>"
    )


def series_chart(
    series: Sequence[Mapping[str, Any]],
    *,
    highlight: Sequence[int],
    title: str,
    closest: Sequence[Any] | None = None,
    fired: Sequence[Sequence[Any]] | None = None,
) -> str:
    """One quantity of several tensors (``Series.to_dict`` entries of one quantity, parameter
    and comparison): the series in ``highlight`` in colour, the rest in grey; the threshold;
    firing points (the series' own, or ``fired``: [step, value] marks); ``closest`` ([step,
    value]) ringed. Returns a ``<figure>``."""
    shown = list(highlight)
    others = [i for i in range(len(series)) if i not in set(shown)]
    drawn = shown + others[:MAX_GREY]
    if fired is None:
        fired = [p for i in shown for p in series[i].get("firings") or []]
    steps = {int(p[0]) for i in drawn for p in series[i].get("points") or []}
    head = series[shown[0] if shown else 0]
    notes = []
    if fired:
        steps_fired = sorted({int(p[0]) for p in fired})
        listed = ", ".join(map(str, steps_fired[:10])) + (" …" if len(steps_fired) > 10 else "")
        notes.append(f"fired at step{'s' if len(steps_fired) > 1 else ''} {listed}")
    elif closest is not None:
        notes.append(f"closest: {_number(as_float(closest[1]))} at step {int(closest[0])}")
    left_out = max(0, len(others) - MAX_GREY)
    if left_out:
        notes.append(f"{left_out} more tensors not drawn")
    if len(steps) <= 1:
        return _one_step(series, drawn, shown, title, notes, head)
    values = [v for i in drawn for v in _finite(series[i].get("points") or [])]
    threshold = _threshold(head)
    limits = values + (_finite(threshold["points"]) if threshold else [])
    if values and max(values) - min(values) <= abs(max(values)) * 1e-12:
        notes.append(f"no spread: every value drawn is {_number(values[0])}")
    lines = [
        {
            "label": _label(series[i]),
            "color": PALETTE[n % len(PALETTE)],
            "width": 1.8,
            "points": _points(series[i].get("points") or []),
        }
        for n, i in enumerate(shown)
    ] + [
        {
            "label": _label(series[i]),
            "color": GREY,
            "width": 0.9,
            "grey": True,
            "points": _points(series[i].get("points") or []),
        }
        for i in others[:MAX_GREY]
    ]
    spec = {
        "ylabel": _short([str(head.get("quantity") or "")], 36),  # the caption has it all
        "log": _use_log(limits),
        "lines": lines,
        "threshold": threshold,
        "fired": _points(fired),
        "closest": _points([closest])[0] if closest is not None and not fired else None,
    }
    keys = [(PALETTE[n % len(PALETTE)], "", _label(series[i])) for n, i in enumerate(shown)]
    keys = keys[:MAX_LEGEND]
    if len(others[:MAX_GREY]):
        keys.append((GREY, "", f"{len(others[:MAX_GREY])} other tensor(s)"))
    if threshold:
        keys.append(("#444b52", "dash", threshold["legend"]))
    if fired:
        keys.append(("#b3261e", "dot", f"fired ({len(fired)})"))
    elif spec["closest"] is not None:
        keys.append(("#b3261e", "ring", "closest approach"))
    return _figure(_spec(spec) + _legend(keys), title, notes)


def _figure(body: str, title: str, notes: Sequence[str]) -> str:
    text = title + "".join(f"; {n}" for n in notes)
    return f"<figure>{body}<figcaption>{escape(text)}</figcaption></figure>"


def _threshold(s: Mapping[str, Any]) -> dict[str, Any] | None:
    if s.get("threshold") is None:
        return None
    changes = s.get("threshold_changes") or []
    first = [[0, _json_value(s["threshold"])]]
    points = _points(changes) if len(changes) > 1 else first
    legend = (
        f"{s.get('parameter')} (moving)"
        if len(changes) > 1
        else f"{s.get('parameter')} = {_number(as_float(s['threshold']))}"
    )
    return {"label": str(s.get("parameter")), "legend": legend, "points": points}


def _one_step(
    series: Sequence[Mapping[str, Any]],
    drawn: Sequence[int],
    shown: Sequence[int],
    title: str,
    notes: list[str],
    head: Mapping[str, Any],
) -> str:
    """A quantity judged at one step: a bar per tensor with the threshold marked, never an
    empty axis."""
    items: list[tuple[str, float]] = []
    step = None
    for i in drawn[:MAX_BARS]:
        pts = series[i].get("points") or []
        if pts:
            step = pts[-1][0]
            items.append((_label(series[i]), as_float(pts[-1][1])))
    threshold = as_float(head.get("threshold")) if head.get("threshold") is not None else None
    where = f"judged at one step ({step})" if step is not None else "no value recorded"
    marks = {_label(series[i]) for i in shown if series[i].get("firing_count")}
    body = _bars(items, threshold=threshold, marked=marks, parameter=head.get("parameter"))
    return _figure(body, f"{title} — {where}", notes)


def _bars(
    items: Sequence[tuple[str, float]],
    *,
    threshold: float | None = None,
    marked: set[str] | frozenset[str] = frozenset(),
    parameter: Any = None,
    integer: bool = False,
) -> str:
    finite = [abs(v) for _, v in items if math.isfinite(v)]
    if threshold is not None and math.isfinite(threshold):
        finite.append(abs(threshold))
    top = max(finite) if finite and max(finite) > 0 else 1.0
    rows = []
    for label, value in items:
        width = 100.0 * abs(value) / top if math.isfinite(value) else 100.0
        text = str(int(value)) if integer and math.isfinite(value) else _number(value)
        cls = "bar fired" if label in marked else "bar"
        rows.append(
            f'<tr><td class="name">{escape(label)}</td><td class="track">'
            f'<div class="{cls}" style="width:{width:.1f}%"></div>'
            + (
                f'<div class="limit" style="left:{100.0 * abs(threshold) / top:.1f}%"></div>'
                if threshold is not None and math.isfinite(threshold)
                else ""
            )
            + f'</td><td class="num">{escape(text)}</td></tr>'
        )
    limit = (
        f'<p class="legend"><span class="key dash"><i></i>{escape(parameter)} = '
        f"{escape(_number(threshold))}</span></p>"
        if threshold is not None and parameter
        else ""
    )
    return f'<table class="bars">{"".join(rows)}</table>{limit}'


def line_chart(
    lines: Mapping[str, Sequence[tuple[int, float]]],
    *,
    title: str,
    ylabel: str = "",
    xlabel: str = "step",
    threshold: tuple[str, float] | None = None,
    fired: Sequence[tuple[int, float]] = (),
) -> str:
    """Lines of ``{name: [(step, value), ...]}`` on shared axes with a legend; optionally a
    threshold line and firing points."""
    if not any(math.isfinite(as_float(v)) for pts in lines.values() for _, v in pts):
        return '<p class="note">No finite values to plot.</p>'
    steps = {int(s) for pts in lines.values() for s, _ in pts}
    if len(steps) <= 1:
        items = [(name, as_float(pts[-1][1])) for name, pts in lines.items() if pts]
        return _figure(
            _bars(
                items,
                threshold=threshold[1] if threshold else None,
                parameter=threshold and threshold[0],
            ),
            f"{title} — judged at one step ({min(steps)})",
            [],
        )
    values = [v for pts in lines.values() for v in _finite(pts)]
    notes = []
    if max(values) - min(values) <= abs(max(values)) * 1e-12:
        notes.append(f"no spread: every value is {_number(values[0])}")
    spec = {
        "xlabel": xlabel,
        "ylabel": ylabel,
        "log": _use_log(values),
        "lines": [
            {"label": _short([name]), "color": PALETTE[n % len(PALETTE)], "points": _points(pts)}
            for n, (name, pts) in enumerate(lines.items())
        ],
        "threshold": (
            {"label": threshold[0], "points": [[0, threshold[1]]]} if threshold else None
        ),
        "fired": _points(fired),
        "closest": None,
    }
    keys = [(PALETTE[n % len(PALETTE)], "", _short([name])) for n, name in enumerate(lines)]
    if threshold:
        keys.append(("#444b52", "dash", f"{threshold[0]} = {_number(threshold[1])}"))
    if fired:
        keys.append(("#b3261e", "dot", f"fired ({len(fired)})"))
    return _figure(_spec(spec) + _legend(keys[: MAX_LEGEND + 2]), title, notes)


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, integer: bool = False) -> str:
    """Horizontal bars, one per ``(label, value)``, the value written after each bar."""
    if not items:
        return '<p class="note">Nothing to plot.</p>'
    return _figure(_bars(items, integer=integer), title, [])


def matrix_table(cells: Mapping[tuple[str, str], float], *, title: str) -> str:
    """A matrix (a confusion matrix: rows the true class, columns the predicted one) as a
    table, each cell shaded by its share of its row; the diagonal in green, the rest in red."""
    rows = sorted({r for r, _ in cells}, key=_natural)
    cols = sorted({c for _, c in cells}, key=_natural)
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        total = sum(v for (a, _), v in cells.items() if a == r and math.isfinite(v)) or 1.0
        tds = []
        for c in cols:
            v = cells.get((r, c), math.nan)
            share = v / total if math.isfinite(v) else 0.0
            tint = "30,122,70" if r == c else "179,38,30"
            text = str(int(v)) if math.isfinite(v) and v == int(v) else _number(v)
            tds.append(
                f'<td style="background:rgba({tint},{0.08 + 0.6 * share:.2f})">{escape(text)}</td>'
            )
        body.append(f"<tr><th>{escape(r)}</th>{''.join(tds)}</tr>")
    table = (
        f'<table class="matrix"><tr><th>true ↓ predicted →</th>{head}</tr>{"".join(body)}</table>'
    )
    return _figure(table, title, [])


def _natural(text: str) -> tuple[int, str]:
    return (int(text), "") if text.lstrip("-").isdigit() else (1 << 62, text)


def histogram(
    edges: Sequence[float], counts: Sequence[int], *, title: str, notes: Sequence[str] = ()
) -> str:
    """Vertical bars of ``counts`` between ``edges`` (HTML and CSS; each bar's title gives its
    range and count on hover)."""
    if not counts:
        return '<p class="note">No finite value to count.</p>'
    top = max(counts) or 1
    bars = "".join(
        f'<div class="hbar" title="{escape(_number(edges[i]))} to '
        f'{escape(_number(edges[i + 1]))}: {c}" style="height:{100.0 * c / top:.1f}%"></div>'
        for i, c in enumerate(counts)
    )
    axis = (
        f'<div class="haxis"><span>{escape(_number(edges[0]))}</span>'
        f"<span>{escape(_number(edges[-1]))}</span></div>"
    )
    return _figure(f'<div class="hist">{bars}</div>{axis}', title, notes)


def firing_values(found: Any) -> str:
    """The fired tensor's values at the firing step (``evaluator.report.histogram``), or
    nothing."""
    if not isinstance(found, Mapping) or not found.get("counts"):
        return ""
    notes = [f"{found.get('size')} values"]
    if found.get("low") is not None and found.get("low") == found.get("high"):
        notes.append(f"no spread: every finite value is {_number(found['low'])}")
    if found.get("nonfinite"):
        notes.append(f"{found['nonfinite']} NaN or infinite, not counted")
    title = f"values of {found.get('tensor')} at step {found.get('step')}"
    return "<h3>The values that fired</h3>" + histogram(
        found.get("edges") or [], found.get("counts") or [], title=title, notes=notes
    )
