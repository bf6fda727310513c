"""Charts for the report pages, drawn with matplotlib (Agg, no display, no network) and
embedded as PNG ``data:`` images, so a page stays one file and its size does not grow with the
number of points drawn.

* ``series_chart``: a tested quantity over the steps for one or more tensors, the threshold
  as a dashed line, firing points and the closest approach marked, the tensors that matter
  highlighted and the others in grey;
* ``line_chart`` and ``bar_chart``: plain charts for CreateXgboostReport.

Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot state), so charts may
be drawn from any thread."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.report.page import escape

if TYPE_CHECKING:  # matplotlib is imported when the first chart is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["as_float", "bar_chart", "line_chart", "series_chart"]

PALETTE = ("#1f6fb4", "#e07b00", "#2a9d4b", "#8e44ad", "#c2185b", "#00838f", "#6d4c41")
GREY = "#b9c0c7"
FIRED = "#b3261e"
THRESHOLD = "#444b52"
MAX_GREY = 60  # other tensors drawn in grey; more are left out (the caption says so)
MAX_LEGEND = 8
_WIDTH, _HEIGHT, _DPI = 8.6, 3.5, 110


def as_float(value: Any) -> float:
    """A number from the JSON files, where NaN and infinities are strings."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, math.nan)
    return math.nan if value is None else float(value)


def _image(fig: Figure, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _figure(height: float = _HEIGHT, *, steps: bool = True) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(_WIDTH, height), layout="constrained")
    ax = fig.subplots()
    ax.grid(True, color="#e6e9ec", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=9)
    if steps:  # the x axis counts steps: whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig, ax


def _arrays(points: Sequence[Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
    steps = np.array([p[0] for p in points], dtype=np.float64)
    values = np.array([as_float(p[1]) for p in points], dtype=np.float64)
    return steps, values


def _short(names: Sequence[str], limit: int = 48) -> str:
    text = ", ".join(names)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _use_log(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(finite.size) and bool(np.all(finite > 0)) and finite.max() / finite.min() > 1e3


def series_chart(
    series: Sequence[Mapping[str, Any]],
    *,
    highlight: Sequence[int],
    title: str,
    closest: Sequence[Any] | None = None,
) -> str:
    """One quantity of several tensors (``Series.to_dict`` entries of one quantity, parameter
    and comparison): the series in ``highlight`` in colour, the rest in grey; the threshold;
    firing points as red dots; ``closest`` ([step, value]) ringed. Returns a ``<figure>``."""
    fig, ax = _figure()
    shown = set(highlight)
    others = [i for i in range(len(series)) if i not in shown]
    drawn_all: list[np.ndarray] = []
    for i in others[:MAX_GREY]:
        steps, values = _arrays(series[i]["points"])
        ax.plot(steps, values, color=GREY, linewidth=0.8, alpha=0.9, zorder=1)
        drawn_all.append(values)
    for n, i in enumerate(highlight):
        s = series[i]
        steps, values = _arrays(s["points"])
        label = _short(s["tensors"]) if n < MAX_LEGEND else None
        ax.plot(
            steps, values, color=PALETTE[n % len(PALETTE)], linewidth=1.6, label=label, zorder=3
        )
        drawn_all.append(values)
    fired = [p for i in highlight for p in series[i].get("firings", [])]
    threshold_values = _threshold(ax, series[highlight[0] if highlight else 0])
    everything = np.concatenate(drawn_all + [threshold_values]) if drawn_all else threshold_values
    if _use_log(everything):
        ax.set_yscale("log")
    if fired:
        steps, values = _arrays(fired)
        finite = np.isfinite(values)
        ax.scatter(
            steps[finite],
            values[finite],
            s=28,
            color=FIRED,
            edgecolors="white",
            linewidths=0.6,
            zorder=5,
            label=f"fired ({len(fired)})",
        )
        _edge_marks(ax, steps[~finite], values[~finite])
    if closest is not None and not fired:
        c_step, c_value = float(closest[0]), as_float(closest[1])
        if math.isfinite(c_value):
            ax.scatter(
                [c_step],
                [c_value],
                s=90,
                facecolors="none",
                edgecolors=FIRED,
                linewidths=1.6,
                zorder=5,
                label=f"closest: {c_value:.4g} at step {int(c_step)}",
            )
    ax.set_xlabel("global step", fontsize=9)
    ax.set_ylabel(_wrap(str(series[0]["quantity"])), fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.85)
    notes = []
    if fired:
        steps_fired = sorted({int(p[0]) for p in fired})
        listed = ", ".join(map(str, steps_fired[:10])) + (" …" if len(steps_fired) > 10 else "")
        notes.append(f"fired at step{'s' if len(steps_fired) > 1 else ''} {listed}")
    elif closest is not None:
        notes.append(f"closest: {as_float(closest[1]):.4g} at step {int(closest[0])}")
    left_out = max(0, len(others) - MAX_GREY)
    if left_out:
        notes.append(f"{left_out} more tensors not drawn")
    text = title + "".join(f"; {n}" for n in notes)
    image = _image(fig, text)
    caption = escape(text)
    return f"<figure>{image}<figcaption>{caption}</figcaption></figure>"


def _threshold(ax: Axes, s: Mapping[str, Any]) -> np.ndarray:
    """Draw the series' threshold (a step line when it moved); returns its values."""
    if s.get("threshold") is None:
        return np.array([], dtype=np.float64)
    label = f"{s.get('parameter')} = {as_float(s['threshold']):.4g}"
    changes = s.get("threshold_changes") or []
    if len(changes) <= 1:
        value = as_float(s["threshold"])
        if math.isfinite(value):
            ax.axhline(value, color=THRESHOLD, linestyle="--", linewidth=1.1, label=label, zorder=2)
        return np.array([value], dtype=np.float64)
    steps, values = _arrays(changes)
    ax.step(
        steps,
        values,
        where="post",
        color=THRESHOLD,
        linestyle="--",
        linewidth=1.1,
        label=f"{s.get('parameter')} (moving)",
        zorder=2,
    )
    return values


def _edge_marks(ax: Axes, steps: np.ndarray, values: np.ndarray) -> None:
    """Firing points with an infinite (or NaN) value, drawn at the top or bottom edge."""
    if not steps.size:
        return
    low, high = ax.get_ylim()
    for step, value in zip(steps, values):
        top = not value < 0
        ax.scatter(
            [step],
            [high if top else low],
            marker="^" if top else "v",
            s=40,
            color=FIRED,
            zorder=6,
            clip_on=False,
        )
        ax.annotate(
            "inf" if math.isinf(value) else "NaN",
            (step, high if top else low),
            textcoords="offset points",
            xytext=(4, -10 if top else 4),
            fontsize=8,
            color=FIRED,
        )


def _wrap(text: str, width: int = 42) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "\n".join(lines[:3])


def line_chart(lines: Mapping[str, Sequence[tuple[int, float]]], *, title: str) -> str:
    """Lines of ``{name: [(step, value), ...]}`` on shared axes with a legend."""
    if not any(np.isfinite(v) for pts in lines.values() for _, v in pts):
        return '<p class="note">No finite values to plot.</p>'
    fig, ax = _figure()
    for n, (name, pts) in enumerate(lines.items()):
        steps, values = _arrays(pts)
        ax.plot(
            steps,
            values,
            color=PALETTE[n % len(PALETTE)],
            linewidth=1.6,
            marker="o" if len(pts) <= 60 else None,
            markersize=3,
            label=_short([name]),
        )
    ax.set_xlabel("step", fontsize=9)
    ax.legend(fontsize=8, loc="best", framealpha=0.85)
    return f"<figure>{_image(fig, title)}</figure>"


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, integer: bool = False) -> str:
    """Horizontal bars, one per ``(label, value)``, the value written after each bar."""
    if not items:
        return '<p class="note">Nothing to plot.</p>'
    fig, ax = _figure(height=max(1.4, 0.28 * len(items) + 0.6), steps=False)
    labels = [label if len(label) <= 28 else label[:27] + "…" for label, _ in items]
    values = [v if np.isfinite(v) else 0.0 for _, v in items]
    y = np.arange(len(items))
    ax.barh(y, values, color=PALETTE[0], height=0.7)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.grid(False, axis="y")
    for k, (_, v) in enumerate(items):
        text = str(int(v)) if integer and np.isfinite(v) else f"{v:.4g}"
        ax.annotate(
            text, (values[k], k), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8
        )
    ax.margins(x=0.12)
    return f"<figure>{_image(fig, title)}</figure>"
