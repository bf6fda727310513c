"""Charts for the report pages drawn in HTML and CSS alone (no script): horizontal bars from a
zero line with a threshold marked (``bar_chart``; a quantity judged at one step), a matrix as
a shaded table (``matrix_table``), a histogram of values (``histogram``, ``firing_values``);
and what every chart shares: ``as_float``, ``short_number``, ``figure``. The charts drawn in
the browser are in ``evaluator.report.charts``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.report.page import escape

__all__ = [
    "as_float",
    "bar_chart",
    "bars",
    "figure",
    "firing_values",
    "histogram",
    "matrix_table",
    "short_number",
]


def as_float(value: Any) -> float:
    """A number from the JSON files, where NaN and infinities are strings."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, math.nan)
    return math.nan if value is None else float(value)


def short_number(value: float) -> str:
    return f"{value:.4g}"


def figure(body: str, title: str, notes: Sequence[str]) -> str:
    text = title + "".join(f"; {n}" for n in notes)
    return f"<figure>{body}<figcaption>{escape(text)}</figcaption></figure>"


def bars(
    items: Sequence[tuple[str, float]],
    *,
    threshold: float | None = None,
    marked: set[str] | frozenset[str] = frozenset(),
    parameter: Any = None,
    integer: bool = False,
) -> str:
    """A bar per ``(label, value)`` from a zero line (a negative value to its left), the
    threshold marked; values not finite fill the track."""
    finite = [v for _, v in items if math.isfinite(v)]
    if threshold is not None and math.isfinite(threshold):
        finite.append(threshold)
    low, high = min([0.0, *finite]), max([0.0, *finite])
    width = (high - low) or 1.0

    def at(value: float) -> float:
        return 100.0 * (value - low) / width

    zero = at(0.0)
    rows = []
    for label, value in items:
        if math.isfinite(value):
            left, right = sorted((zero, at(value)))
        else:
            left, right = 0.0, 100.0
        text = str(int(value)) if integer and math.isfinite(value) else short_number(value)
        cls = "bar fired" if label in marked else "bar"
        rows.append(
            f'<tr><td class="name">{escape(label)}</td><td class="track">'
            f'<div class="{cls}" style="margin-left:{left:.1f}%;width:{right - left:.1f}%">'
            "</div>"
            + (f'<div class="zero" style="left:{zero:.1f}%"></div>' if low < 0 else "")
            + (
                f'<div class="limit" style="left:{at(threshold):.1f}%"></div>'
                if threshold is not None and math.isfinite(threshold)
                else ""
            )
            + f'</td><td class="num">{escape(text)}</td></tr>'
        )
    limit = (
        f'<p class="legend"><span class="key dash"><i></i>{escape(parameter)} = '
        f"{escape(short_number(threshold))}</span>"
        + (
            f'<span class="key">bars start at 0; the axis runs from {escape(short_number(low))} '
            f"to {escape(short_number(high))}</span>"
            if low < 0
            else ""
        )
        + "</p>"
        if threshold is not None and parameter
        else ""
    )
    return f'<table class="bars">{"".join(rows)}</table>{limit}'


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, integer: bool = False) -> str:
    """Horizontal bars, one per ``(label, value)``, the value written after each bar."""
    if not items:
        return '<p class="note">Nothing to plot.</p>'
    return figure(bars(items, integer=integer), title, [])


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
            text = str(int(v)) if math.isfinite(v) and v == int(v) else short_number(v)
            tds.append(
                f'<td style="background:rgba({tint},{0.08 + 0.6 * share:.2f})">{escape(text)}</td>'
            )
        body.append(f"<tr><th>{escape(r)}</th>{''.join(tds)}</tr>")
    table = (
        f'<table class="matrix"><tr><th>true ↓ predicted →</th>{head}</tr>{"".join(body)}</table>'
    )
    return figure(table, title, [])


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
        f'<div class="hbar" title="{escape(short_number(edges[i]))} to '
        f'{escape(short_number(edges[i + 1]))}: {c}" style="height:{100.0 * c / top:.1f}%"></div>'
        for i, c in enumerate(counts)
    )
    axis = (
        f'<div class="haxis"><span>{escape(short_number(edges[0]))}</span>'
        f"<span>{escape(short_number(edges[-1]))}</span></div>"
    )
    return figure(f'<div class="hist">{bars}</div>{axis}', title, notes)


def firing_values(found: Any) -> str:
    """The fired tensor's values at the firing step (``evaluator.report.histogram``), or
    nothing."""
    if not isinstance(found, Mapping) or not found.get("counts"):
        return ""
    notes = [f"{found.get('size')} values"]
    if found.get("low") is not None and found.get("low") == found.get("high"):
        notes.append(f"no spread: every finite value is {short_number(found['low'])}")
    if found.get("nonfinite"):
        notes.append(f"{found['nonfinite']} NaN or infinite, not counted")
    title = f"values of {found.get('tensor')} at step {found.get('step')}"
    return "<h3>The values that fired</h3>" + histogram(
        found.get("edges") or [], found.get("counts") or [], title=title, notes=notes
    )
