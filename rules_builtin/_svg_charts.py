"""Inline SVG charts for the HTML reports: a line chart of series over steps and a bar chart,
plain markup with no script, so a report opens offline in any browser."""

from __future__ import annotations

import html

import numpy as np

__all__ = ["bar_chart", "escape", "line_chart", "number"]

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def escape(value: object) -> str:
    return html.escape(str(value), quote=True)


def number(value: float) -> str:
    return f"{value:.4g}"


def _span(low: float, high: float) -> tuple[float, float]:
    if high > low:
        return low, high
    pad = abs(low) * 0.05 or 1.0
    return low - pad, high + pad


def line_chart(series: dict[str, list[tuple[int, float]]], *, title: str) -> str:
    """Lines of ``{name: [(step, value), ...]}`` on shared axes, with a legend."""
    finite = {k: [(s, v) for s, v in pts if np.isfinite(v)] for k, pts in series.items()}
    points = [pt for pts in finite.values() for pt in pts]
    if not points:
        return '<p class="note">No finite values to plot.</p>'
    width, height, left, right, top, bottom = 640, 300, 70, 20, 15, 45
    legend = 18 * len(finite)
    x0, x1 = _span(min(s for s, _ in points), max(s for s, _ in points))
    y0, y1 = _span(min(v for _, v in points), max(v for _, v in points))
    plot_w, plot_h = width - left - right, height - top - bottom

    def xy(step: float, value: float) -> tuple[float, float]:
        return (
            left + (step - x0) / (x1 - x0) * plot_w,
            top + (1 - (value - y0) / (y1 - y0)) * plot_h,
        )

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {width} {height + legend}" width="{width}">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    for k in range(5):
        value = y0 + (y1 - y0) * k / 4
        _, y = xy(x0, value)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" '
            f'text-anchor="end">{escape(number(value))}</text>'
        )
    for step in sorted({round(x0 + (x1 - x0) * k / 4) for k in range(5)}):  # whole steps
        x, _ = xy(step, y0)
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" font-size="11" '
            f'text-anchor="middle">{step}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 34}" font-size="12" '
        'text-anchor="middle">step</text>'
    )
    for n, (name, pts) in enumerate(finite.items()):
        color = PALETTE[n % len(PALETTE)]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(s, v) for s, v in pts))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        if len(pts) <= 60:
            for s, v in pts:
                x, y = xy(s, v)
                out.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                    f"<title>{escape(name)} step {s}: {escape(number(v))}</title></circle>"
                )
        ly = height + 18 * n + 4
        out.append(f'<rect x="{left}" y="{ly}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{left + 18}" y="{ly + 11}" font-size="12">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(items: list[tuple[str, float]], *, title: str, integer: bool = False) -> str:
    """Horizontal bars, one per ``(label, value)``, values written after the bars."""
    if not items:
        return '<p class="note">Nothing to plot.</p>'
    width, label_w, value_w, bar_h, gap = 640, 170, 70, 16, 6
    bar_area = width - label_w - value_w
    largest = max((v for _, v in items if np.isfinite(v)), default=0.0)
    height = len(items) * (bar_h + gap) + gap
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {width} {height}" width="{width}">'
    ]
    for n, (label, value) in enumerate(items):
        y = gap + n * (bar_h + gap)
        length = bar_area * value / largest if largest > 0 and np.isfinite(value) else 0.0
        short = label if len(label) <= 24 else label[:23] + "\u2026"
        text = str(int(value)) if integer and np.isfinite(value) else number(value)
        out.append(
            f'<text x="{label_w - 6}" y="{y + 12}" font-size="12" '
            f'text-anchor="end"><title>{escape(label)}</title>{escape(short)}</text>'
        )
        out.append(
            f'<rect x="{label_w}" y="{y}" width="{max(length, 0.0):.1f}" '
            f'height="{bar_h}" fill="{PALETTE[0]}"/>'
        )
        out.append(
            f'<text x="{label_w + max(length, 0.0) + 4:.1f}" y="{y + 12}" '
            f'font-size="12">{escape(text)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


# -------------------------------------------------------------------- writing
