"""The charts of one rule's section of the report: the curves behind the verdict (what the
rule watched without a threshold) and what the rule tested (the quantities it compared with a
threshold, the firing or closest series in colour). ``evaluator.report.sections`` places them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.report.charts import as_float, run_chart, series_chart
from evaluator.report.html_charts import matrix_table

__all__ = ["MAX_CHARTS", "MAX_CURVES", "chart_family", "curves", "span", "tested_charts"]

MAX_CHARTS = 8
MAX_CURVES = 4  # charts of what the rule watched (the curves behind the verdict)


# ---------------------------------------------------------------- curves


def curves(
    rule: Mapping[str, Any],
    series: Sequence[Mapping[str, Any]],
    run: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The curves behind the verdict: what the rule watched without a threshold (the loss
    per mode, what a rule of one's own read), one chart per quantity, the firing steps
    marked on them. A quantity the trial holds as a whole (``run``: the loss, read from the
    trial when the report is written) is drawn over the whole run in every mode, what the
    rule read as dots on it."""
    watched = [s for s in series if s.get("parameter") is None]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for s in watched:
        groups.setdefault(str(s.get("quantity")), []).append(s)
    whole: dict[str, list[Mapping[str, Any]]] = {}
    for s in run:
        whole.setdefault(str(s.get("quantity")), []).append(s)
        groups.setdefault(str(s.get("quantity")), [])
    if not groups:
        return ""
    steps = rule.get("fired_steps") or []
    # (mode, step): a writer's step names its mode (``fired_modes``), a global step none
    modes = rule.get("fired_modes") or [None] * len(steps)
    fired = sorted(set(zip(modes, steps, strict=False)), key=lambda f: (f[1], f[0] or ""))
    parts = ["<h3>The curves behind the verdict</h3>"]
    for quantity, members in list(groups.items())[:MAX_CURVES]:
        cells = _cells(members)
        if cells is not None:  # "a → b" per series: a matrix at its last step
            parts.append(matrix_table(cells, title=quantity))
            continue
        if quantity in whole:
            marks = _marks(fired, [*whole[quantity], *members])
            kinds = {str(s.get("mode")) for s in whole[quantity]}
            title = f"{quantity} over the whole run" + (", per mode" if len(kinds) > 1 else "")
            parts.append(run_chart(whole[quantity], members, title=title, fired=marks))
            continue
        shown = list(range(min(len(members), 8)))
        modes = sorted({str(s.get("mode")) for s in members if s.get("mode")})
        title = quantity + (f" per mode ({', '.join(modes)})" if modes else "")
        marks = _marks(fired, members[:8])
        parts.append(series_chart(members, highlight=shown, title=title, fired=marks))
    if len(groups) > MAX_CURVES:
        parts.append(f'<p class="note">{len(groups) - MAX_CURVES} more quantities not charted.</p>')
    return "\n".join(parts)


def _marks(
    fired: Sequence[tuple[str | None, int]], members: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """The [step, value] of each firing (mode, step), from the first series holding it in
    that mode (a firing without a mode: in any)."""
    marks = []
    for mode, step in fired:
        for s in members:
            if mode is not None and s.get("mode") not in (None, mode):
                continue
            found = [p for p in s.get("points") or [] if p[0] == step]
            if found:
                marks.append(found[0])
                break
    return marks


def span(series: Sequence[Mapping[str, Any]], run: Sequence[Mapping[str, Any]]) -> list[int]:
    """[first, last] step of everything a section draws: the axis its charts share."""
    steps = [int(p[0]) for s in [*series, *run] for p in s.get("points") or []]
    return [min(steps), max(steps)] if steps else []


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
    status: str,
    evidence: Mapping[str, Any],
    series: Sequence[Mapping[str, Any]],
    steps: Sequence[int] = (),
) -> str:
    """What the rule tested: one chart per quantity compared with a threshold (those that
    fired for a firing, else those holding a closest approach), at most ``MAX_CHARTS``, on an
    axis that shows 0 and covers ``steps`` ([first, last]: the run's)."""
    watched = bool(series)
    series = [s for s in series if s.get("parameter") is not None]
    if not series:
        if status in ("IssuesFound", "NoIssuesFound") and not watched:
            return '<p class="note">The rule recorded no series to chart.</p>'
        return ""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for s in series:
        key = (chart_family(str(s.get("quantity"))), s.get("parameter"), s.get("comparison"))
        groups.setdefault(key, []).append(s)
    titles = {k: _title(k[0], m) for k, m in groups.items()}
    groups = {k: _merged(m) for k, m in groups.items()}
    closest = {
        (c.get("parameter"), c.get("comparison")): c
        for c in evidence.get("closest") or []
        if isinstance(c, Mapping)
    }
    chosen = _choose(groups, closest, fired=status == "IssuesFound")
    parts = ["<h3>What the rule tested</h3>"]  # its derived quantity, with the threshold
    for group_key in chosen[:MAX_CHARTS]:
        members = groups[group_key]
        _, parameter, comparison = group_key
        near = closest.get((parameter, comparison))
        highlight = _highlight(members, near)
        title = titles[group_key] + (f", fires when {comparison} {parameter}" if parameter else "")
        mark = None
        if near is not None and highlight:
            mark = [near.get("step"), near.get("value")]
        parts.append(
            series_chart(
                members,
                highlight=highlight,
                title=title,
                closest=mark,
                span=steps,
                zero=True,
                ylabel=group_key[0],
            )
        )
    if len(chosen) > MAX_CHARTS:
        parts.append(f'<p class="note">{len(chosen) - MAX_CHARTS} more quantities not charted.</p>')
    return "\n".join(parts)


# A window a quantity names ("from the value at TRAIN step … to the mean over TRAIN steps …"):
# the clause it starts is left out of a chart's title; the table of reasons has the steps.
_CLAUSES = (" from ", " between ", " since ", " over ", " at ", " in ")


def chart_family(label: str) -> str:
    """The family of a series label, which one chart draws: a label whose windows move with
    the step (their numbers left out as "…", ``series_label``) is cut before the first clause
    that names a window ("decrease (%) of the loss from the value at TRAIN step … to …" is
    "decrease (%) of the loss"); any other label is its own family."""
    if "…" not in label:
        return label
    cut = label.index("…")
    starts = [i for c in _CLAUSES if 0 < (i := label.find(c)) < cut]
    head = label[: min(starts)] if starts else label[:cut]
    return head.replace("…", "").strip(" ,:;") or label.replace("…", "").strip()


def window_free(label: str) -> str:
    """``label`` without the clauses that name a moving window ("the mean over TRAIN steps …
    of the loss" is "the mean of the loss"): a title that names no step it cannot give."""
    while "…" in label:
        cut = label.index("…")
        starts = [label.rfind(c, 0, cut) for c in _CLAUSES]
        start = max(starts)
        if start < 0:
            return label.replace("…", "").strip()
        label = label[:start] + label[cut + 1 :]
    return " ".join(label.split())


def _title(family: str, members: Sequence[Mapping[str, Any]]) -> str:
    """A tested chart's title: its one label without windows, or the family of several."""
    labels = {window_free(str(s.get("quantity"))) for s in members}
    return labels.pop() if len(labels) == 1 else family


def _merged(members: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The series of one chart, those of the same tensors and mode (windows a label names
    differently, ``chart_family``) as one: points and firings in step order, a threshold that
    differs between them drawn as moving."""
    by_key: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for s in members:
        by_key.setdefault((tuple(s.get("tensors") or []), s.get("mode")), []).append(s)
    out: list[Mapping[str, Any]] = []
    for group in by_key.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        merged = dict(group[0])
        merged["points"] = sorted((p for s in group for p in s.get("points") or []), key=_step)
        merged["firings"] = sorted((p for s in group for p in s.get("firings") or []), key=_step)
        merged["firing_count"] = sum(int(s.get("firing_count") or 0) for s in group)
        merged["count"] = sum(int(s.get("count") or 0) for s in group)
        thresholds = {as_float(s.get("threshold")) for s in group}
        if len(thresholds) > 1:
            starts = [
                [min(_step(p) for p in s["points"]), s.get("threshold")]
                for s in group
                if s.get("points")
            ]
            merged["threshold_changes"] = sorted(
                (c for s in group for c in s.get("threshold_changes") or []), key=_step
            ) or sorted(starts, key=_step)
        out.append(merged)
    return out


def _step(point: Sequence[Any]) -> int:
    return int(point[0])


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
