"""Charts for the report pages: interactive charts drawn in the browser by uPlot (MIT, vendored
in ``static/`` with its license, about 50 KB) and our ``static/charts.js``, both inlined into
the page, so a page stays one file that opens from disk and fetches nothing. Python writes
each chart as a JSON spec after an empty ``<div>``; the script draws it. Hover shows the step
and the values, a drag zooms on a range of steps, a double-click shows them all again.

* ``series_chart``: a tested quantity over the steps for one or more tensors, the threshold
  as a dashed line, firing points and the closest approach marked, the tensors that matter
  in colour and the others in grey; a quantity judged at one step only is drawn over the
  run's steps (``span``), or as bars (``evaluator.report.html_charts``) when there are none;
* ``run_chart``: a quantity over the whole run, one line per tensor and mode, what the rule
  read of it as dots, the firings marked;
* ``line_chart``: plain lines over the steps (CreateXgboostReport).

Every chart's step axis is titled by ``step_axis``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.report.html_charts import as_float, bars, figure, short_number
from evaluator.report.page import escape, inline_json

__all__ = [
    "PALETTE",
    "as_float",
    "line_chart",
    "mode_label",
    "run_chart",
    "series_chart",
    "step_axis",
]

PALETTE = ("#1f6fb4", "#e07b00", "#2a9d4b", "#8e44ad", "#c2185b", "#00838f", "#6d4c41")
GREY = "#b9c0c7"
MAX_GREY = 60  # other tensors drawn in grey; more are left out (the caption says so)
MAX_LEGEND = 8
MAX_BARS = 30


def step_axis() -> str:
    """The title of every chart's step axis: the one place that says which steps a chart's x
    values are: the steps a user sees (docs/compatibility.md, "Steps users see"), the global
    step of smdebug's output, the step the writer logged in a TensorBoard run."""
    return "step"


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


def _names(names: Sequence[str]) -> str:
    """Names in full (a legend wraps them; nothing is cut)."""
    return ", ".join(names)


def _steps_text(steps: Sequence[int], shown: int = 10) -> str:
    """``steps`` listed, the first ``shown`` of them and how many more."""
    text = ", ".join(map(str, steps[:shown]))
    more = len(steps) - shown
    return text + (f" and {more} more" if more > 0 else "")


def axis_title(quantity: str, limit: int = 40) -> str:
    """A y-axis title that needs no cutting: ``quantity`` when it fits, else none (the
    caption names it in full)."""
    return quantity if len(quantity) <= limit else ""


def _use_log(values: Sequence[float]) -> bool:
    return bool(values) and min(values) > 0 and max(values) / min(values) > 1e3


def _label(s: Mapping[str, Any]) -> str:
    mode = s.get("mode")
    return _names(s.get("tensors") or [str(s.get("quantity"))]) + (f" [{mode}]" if mode else "")


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
    span: Sequence[int] | None = None,
    zero: bool = False,
    ylabel: str | None = None,
) -> str:
    """One quantity of several tensors (``Series.to_dict`` entries of one quantity, parameter
    and comparison): the series in ``highlight`` in colour, the rest in grey; the threshold;
    firing points (the series' own, or ``fired``: [step, value] marks); ``closest`` ([step,
    value]) ringed; ``ylabel``, the value axis' title (else the quantity, when it fits).
    ``span`` ([first, last] step): the steps the axis covers (the run's, so
    a quantity tested at one step is still drawn over the run); ``zero``: the value axis
    shows 0 (a linear one). Returns a ``<figure>``."""
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
        listed = _steps_text(steps_fired)
        notes.append(f"fired at step{'s' if len(steps_fired) > 1 else ''} {listed}")
    elif closest is not None:
        notes.append(f"closest: {short_number(as_float(closest[1]))} at step {int(closest[0])}")
    left_out = max(0, len(others) - MAX_GREY)
    if left_out:
        notes.append(f"{left_out} more tensors not drawn")
    if len(steps | set(span or ())) <= 1:
        return _one_step(series, drawn, shown, title, notes, head)
    values = [v for i in drawn for v in _finite(series[i].get("points") or [])]
    threshold = _threshold(head)
    limits = values + (_finite(threshold["points"]) if threshold else [])
    if len(values) > 1 and max(values) - min(values) <= abs(max(values)) * 1e-12:
        notes.append(f"no spread: every value drawn is {short_number(values[0])}")
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
    log = _use_log(limits)
    spec = {
        "xlabel": step_axis(),
        "ylabel": axis_title(ylabel or str(head.get("quantity") or "")),  # the caption: all
        "log": log,
        "span": [int(s) for s in span] if span else None,
        "zero": zero and not log,
        "lines": lines,
        "threshold": threshold,
        "fired": _points(fired),
        "closest": _points([closest])[0] if closest is not None and not fired else None,
    }
    keys = _series_keys(
        [_label(series[i]) for i in shown], len(others[:MAX_GREY]), threshold, len(fired)
    )
    if not fired and spec["closest"] is not None:
        keys.append(("#b3261e", "ring", "closest approach"))
    return figure(_spec(spec) + _legend(keys), title, notes)


def _series_keys(
    labels: Sequence[str], grey: int, threshold: Mapping[str, Any] | None, fired: int
) -> list[tuple[str, str, str]]:
    """The legend of a ``series_chart``: the series in colour (``labels``), the ``grey``
    ones, the threshold and the firings."""
    keys = [(PALETTE[n % len(PALETTE)], "", label) for n, label in enumerate(labels)]
    keys = keys[:MAX_LEGEND]
    if grey:
        keys.append((GREY, "", f"{grey} other tensor(s)"))
    elif len(labels) > MAX_LEGEND:
        keys.append((GREY, "", f"{len(labels) - MAX_LEGEND} more in colour"))
    if threshold:
        keys.append(("#444b52", "dash", threshold["legend"]))
    if fired:
        keys.append(("#b3261e", "dot", f"fired ({fired})"))
    return keys


MODE_WORDS = {"TRAIN": "training", "EVAL": "validation", "PREDICT": "prediction"}


def mode_label(tensor: str, mode: Any) -> str:
    """A curve's name: the tensor and its mode, in words ("loss, validation (EVAL)")."""
    if not mode or mode == "GLOBAL":
        return tensor
    word = MODE_WORDS.get(str(mode))
    return f"{tensor}, {word} ({mode})" if word else f"{tensor} ({mode})"


def _curve(s: Mapping[str, Any]) -> tuple[str, str]:
    """Which curve a series is on: its tensors and mode (saved without a mode counts as
    training)."""
    mode = s.get("mode")
    return _names(s.get("tensors") or []), "TRAIN" if mode in (None, "GLOBAL") else str(mode)


def run_chart(
    run: Sequence[Mapping[str, Any]],
    reads: Sequence[Mapping[str, Any]],
    *,
    title: str,
    fired: Sequence[Sequence[Any]] = (),
) -> str:
    """The whole run of a quantity (``run``: ``evaluator.report.run_curves`` series, one line
    per tensor and mode) with what the rule read of it (``reads``: its watched series, drawn as
    dots in the colour of their line) and the firing points (``fired``, [step, value])."""
    colours: dict[tuple[str, str], str] = {}
    for s in run:
        colours.setdefault(_curve(s), PALETTE[len(colours) % len(PALETTE)])
    for s in reads:  # on its line; a validation value of ``x`` on Keras' ``val_x`` line
        twin = (f"val_{_curve(s)[0]}", "EVAL")
        key = twin if _curve(s) not in colours and twin in colours else _curve(s)
        colours[_curve(s)] = colours.get(key) or PALETTE[len(colours) % len(PALETTE)]

    def colour(s: Mapping[str, Any]) -> str:
        return colours[_curve(s)]

    def name(s: Mapping[str, Any]) -> str:
        return mode_label(_names(s.get("tensors") or []), s.get("mode"))

    lines = [
        {"label": name(s), "color": colour(s), "width": 1.6, "points": _points(s["points"])}
        for s in run
    ] + [
        {
            "label": f"{name(s)}, read by the rule",
            "color": colour(s),
            "dots": True,
            "points": _points(s.get("points") or []),
        }
        for s in reads
    ]
    values = [v for s in [*run, *reads] for v in _finite(s.get("points") or [])]
    spec = {
        "xlabel": step_axis(),
        "ylabel": axis_title(str((run or reads)[0].get("quantity") or "")),
        "log": _use_log(values),
        "lines": lines,
        "threshold": None,
        "fired": _points(fired),
        "closest": None,
    }
    keys = [(colour(s), "", f"{name(s)}: {s.get('count')} values") for s in run]
    read = sum(int(s.get("count") or len(s.get("points") or [])) for s in reads)
    if reads:
        keys.append(("#444b52", "read", f"read by the rule ({read} values)"))
    if fired:
        keys.append(("#b3261e", "dot", f"fired ({len(fired)})"))
    notes = []
    if fired:
        steps_fired = sorted({int(p[0]) for p in fired})
        notes.append(
            f"fired at step{'s' if len(steps_fired) > 1 else ''} {_steps_text(steps_fired)}"
        )
    if any(int(s.get("count") or 0) > len(s["points"]) for s in run):
        notes.append(
            "a long series is drawn from the lowest and highest value of each run of steps "
            "and its firing steps"
        )
    if len(values) > 1 and max(values) - min(values) <= abs(max(values)) * 1e-12:
        notes.append(f"no spread: every value drawn is {short_number(values[0])}")
    return figure(_spec(spec) + _legend(keys), title, notes)


def _threshold(s: Mapping[str, Any]) -> dict[str, Any] | None:
    if s.get("threshold") is None:
        return None
    changes = s.get("threshold_changes") or []
    first = [[0, _json_value(s["threshold"])]]
    points = _points(changes) if len(changes) > 1 else first
    legend = (
        f"{s.get('parameter')} (moving)"
        if len(changes) > 1
        else f"{s.get('parameter')} = {short_number(as_float(s['threshold']))}"
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
    body = bars(items, threshold=threshold, marked=marks, parameter=head.get("parameter"))
    return figure(body, f"{title} — {where}", notes)


def line_chart(
    lines: Mapping[str, Sequence[tuple[int, float]]],
    *,
    title: str,
    ylabel: str = "",
    xlabel: str = "",
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
        return figure(
            bars(
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
        notes.append(f"no spread: every value is {short_number(values[0])}")
    spec = {
        "xlabel": xlabel or step_axis(),
        "ylabel": ylabel,
        "log": _use_log(values),
        "lines": [
            {"label": name, "color": PALETTE[n % len(PALETTE)], "points": _points(pts)}
            for n, (name, pts) in enumerate(lines.items())
        ],
        "threshold": (
            {"label": threshold[0], "points": [[0, threshold[1]]]} if threshold else None
        ),
        "fired": _points(fired),
        "closest": None,
    }
    keys = [(PALETTE[n % len(PALETTE)], "", name) for n, name in enumerate(lines)]
    if threshold:
        keys.append(("#444b52", "dash", f"{threshold[0]} = {short_number(threshold[1])}"))
    if fired:
        keys.append(("#b3261e", "dot", f"fired ({len(fired)})"))
    return figure(_spec(spec) + _legend(keys[: MAX_LEGEND + 2]), title, notes)
