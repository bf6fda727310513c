"""The charts of one rule's section of the report: the curves behind the verdict (what the
rule watched without a threshold) and what the rule tested (the quantities it compared with a
threshold, the firing or closest series in colour). ``evaluator.report.sections`` places them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.report.charts import as_float, matrix_table, series_chart

__all__ = ["MAX_CHARTS", "MAX_CURVES", "curves", "tested_charts"]

MAX_CHARTS = 8
MAX_CURVES = 4  # charts of what the rule watched (the curves behind the verdict)


# ---------------------------------------------------------------- curves


def curves(rule: Mapping[str, Any], series: Sequence[Mapping[str, Any]]) -> str:
    """The curves behind the verdict: what the rule watched without a threshold (the loss
    per mode, what a rule of one's own read), one chart per quantity, the firing steps
    marked on them."""
    watched = [s for s in series if s.get("parameter") is None]
    if not watched:
        return ""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for s in watched:
        groups.setdefault(str(s.get("quantity")), []).append(s)
    steps = rule.get("fired_steps") or []
    # (mode, step): a writer's step names its mode (``fired_modes``), a global step none
    fired = set(zip(rule.get("fired_modes") or [None] * len(steps), steps, strict=False))
    parts = ["<h3>The curves behind the verdict</h3>"]
    for quantity, members in list(groups.items())[:MAX_CURVES]:
        cells = _cells(members)
        if cells is not None:  # "a → b" per series: a matrix at its last step
            parts.append(matrix_table(cells, title=quantity))
            continue
        shown = list(range(min(len(members), 8)))
        marks = []
        for mode, step in sorted(fired, key=lambda f: (f[1], f[0] or "")):
            for s in members[:8]:
                if mode is not None and s.get("mode") not in (None, mode):
                    continue
                found = [p for p in s.get("points") or [] if p[0] == step]
                if found:
                    marks.append(found[0])
                    break
        modes = sorted({str(s.get("mode")) for s in members if s.get("mode")})
        title = quantity + (f" per mode ({', '.join(modes)})" if modes else "")
        parts.append(series_chart(members, highlight=shown, title=title, fired=marks))
    if len(groups) > MAX_CURVES:
        parts.append(f'<p class="note">{len(groups) - MAX_CURVES} more quantities not charted.</p>')
    return "\n".join(parts)


def _cells(members: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float] | None:
    """The matrix a group of watched series holds when each names one cell, "row → column"
    (Confusion's matrix), from each series' last point; None for any other group."""
    cells: dict[tuple[str, str], float] = {}
    for s in members:
        names = s.get("tensors") or []
        points = s.get("points") or []
        if len(names) != 1 or " → " not in str(names[0]) or not points:
            return None
        row, col = str(names[0]).split(" → ", 1)
        cells[(row, col)] = as_float(points[-1][1])
    return cells if len(members) > 1 else None


# ---------------------------------------------------------------- charts


def tested_charts(
    status: str, evidence: Mapping[str, Any], series: Sequence[Mapping[str, Any]]
) -> str:
    """What the rule tested: one chart per quantity compared with a threshold (those that
    fired for a firing, else those holding a closest approach), at most ``MAX_CHARTS``."""
    watched = bool(series)
    series = [s for s in series if s.get("parameter") is not None]
    if not series:
        if status in ("IssuesFound", "NoIssuesFound") and not watched:
            return '<p class="note">The rule recorded no series to chart.</p>'
        return ""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for s in series:
        groups.setdefault((s.get("quantity"), s.get("parameter"), s.get("comparison")), []).append(
            s
        )
    closest = {
        (c.get("parameter"), c.get("comparison")): c
        for c in evidence.get("closest") or []
        if isinstance(c, Mapping)
    }
    chosen = _choose(groups, closest, fired=status == "IssuesFound")
    parts = ["<h3>What the rule tested</h3>"]  # its derived quantity, with the threshold
    for group_key in chosen[:MAX_CHARTS]:
        members = groups[group_key]
        quantity, parameter, comparison = group_key
        near = closest.get((parameter, comparison))
        highlight = _highlight(members, near)
        title = f"{quantity}" + (f" — fires when {comparison} {parameter}" if parameter else "")
        mark = None
        if near is not None and highlight:
            mark = [near.get("step"), near.get("value")]
        parts.append(series_chart(members, highlight=highlight, title=title, closest=mark))
    if len(chosen) > MAX_CHARTS:
        parts.append(f'<p class="note">{len(chosen) - MAX_CHARTS} more quantities not charted.</p>')
    return "\n".join(parts)


def _choose(
    groups: Mapping[tuple[Any, ...], Sequence[Mapping[str, Any]]],
    closest: Mapping[tuple[Any, Any], Mapping[str, Any]],
    *,
    fired: bool,
) -> list[tuple[Any, ...]]:
    """The quantities to chart: those that fired (for a firing), else those holding a closest
    approach, else (series recorded without a threshold) all of them."""
    firing = [k for k, m in groups.items() if any(s.get("firing_count") for s in m)]
    if fired and firing:
        return sorted(firing, key=lambda k: _first_firing(groups[k]))
    near = [k for k, m in groups.items() if any(_holds(s, closest.get((k[1], k[2]))) for s in m)]
    return near or list(groups)


def _first_firing(members: Sequence[Mapping[str, Any]]) -> float:
    steps = [f[0] for s in members for f in s.get("firings") or []]
    return min(steps) if steps else float("inf")


def _holds(s: Mapping[str, Any], check: Mapping[str, Any] | None) -> bool:
    return check is not None and list(s.get("tensors") or []) == list(check.get("tensors") or [])


def _highlight(members: Sequence[Mapping[str, Any]], near: Mapping[str, Any] | None) -> list[int]:
    """Indices of the series to draw in colour: those that fired, else the closest one's;
    a single series is always in colour."""
    fired = [i for i, s in enumerate(members) if s.get("firing_count")]
    if fired:
        return fired
    held = [i for i, s in enumerate(members) if _holds(s, near)]
    return held or ([0] if len(members) == 1 else [])
