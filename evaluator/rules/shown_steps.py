"""What a rule recorded, with the steps the writer logged (``Trial.writer_step``): the evidence's
comparisons and the report's series are kept in global steps while the rule runs, and shown
here in the writer's steps (docs/compatibility.md, "Steps users see"). A trial whose global
steps are the writer's (smdebug's output, a TensorBoard run without phases) is shown as is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evaluator.modes import ModeKeys, WriterStep

__all__ = [
    "check_shown",
    "condition_words",
    "logged_step",
    "series_shown",
    "step_words",
    "writer_steps",
]

Shown = Callable[[int], WriterStep]


def writer_steps(trial: Any) -> Shown | None:
    """The trial's ``writer_step`` when its format may show a global step as another step
    (``Trial.maps_writer_steps``), else None (a stand-in trial without it included)."""
    if getattr(trial, "maps_writer_steps", False) is not True:
        return None
    return trial.writer_step  # type: ignore[no-any-return]


def step_words(
    trial: Any, step: int, mode: ModeKeys | None = None, mode_step: int | None = None
) -> str:
    """Where a rule's sentence says it judged the global ``step``: ``EVAL step 100`` (the
    writer's step, where the trial's global steps are not the writer's), ``TRAIN step 5
    (global step 10)`` (given a mode step of smdebug's output), else ``step 500``."""
    shown = writer_steps(trial)
    at = shown(step) if shown is not None else None
    if at is not None and at.mode is not None:
        return str(at)
    if mode is not None and mode is not ModeKeys.GLOBAL and mode_step is not None:
        return f"{mode.name} step {mode_step} (global step {step})"
    return f"step {step}"


def logged_step(trial: Any, step: int) -> int:
    """The step the writer logged for the global ``step`` (the step itself where they are
    the same): for figures that name a step."""
    shown = writer_steps(trial)
    return shown(step).step if shown is not None else step


def condition_words(trial: Any, condition: Any) -> str:
    """The log line of a firing (a ``RuleEvaluationConditionMet``): smdebug's text, at the
    step the writer logged and its mode where the global step is not it."""
    text = str(condition)
    step = getattr(condition, "step", None)
    shown = writer_steps(trial)
    at = _safe(shown, step) if shown is not None else None
    if at is None or at.mode is None:
        return text
    return text.replace(f" at step {step} ", f" at step {at.step} ({at.mode.name}) ", 1)


def _safe(shown: Shown, step: Any) -> WriterStep | None:
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    found = shown(step)
    return found if found.mode is not None else None


def check_shown(check: dict[str, Any], shown: Shown | None) -> dict[str, Any]:
    """A comparison (``Check.to_dict()``) at the writer's step: ``step`` is the logged step,
    ``mode`` its mode, ``global_step`` the trial's (kept to read the value again)."""
    at = _safe(shown, check.get("step")) if shown is not None else None
    if at is None or at.mode is None:
        return check
    return {
        **check,
        "step": at.step,
        "mode": at.mode.name,
        "mode_step": at.step,
        "global_step": check["step"],
    }


def series_shown(series: list[dict[str, Any]], shown: Shown | None) -> list[dict[str, Any]]:
    """The report's series (``Series.to_dict``) with their points at the writer's steps; a
    series that held steps of several modes becomes one series per mode, so that no axis
    draws two values at one step."""
    if shown is None:
        return series
    out: list[dict[str, Any]] = []
    for one in series:
        out.extend(_split(one, shown))
    return out


def _split(series: Mapping[str, Any], shown: Shown) -> list[dict[str, Any]]:
    def place(point: Any) -> tuple[str | None, list[Any]] | None:
        at = _safe(shown, point[0]) if isinstance(point, list) and point else None
        if at is None or at.mode is None:
            return None
        return at.mode.name, [at.step, *point[1:]]

    keys = ("points", "firings", "threshold_changes")
    parts: dict[str | None, dict[str, list[Any]]] = {}
    for key in keys:
        for point in series.get(key) or []:
            found = place(point)
            mode, moved = (None, point) if found is None else found
            parts.setdefault(mode, {k: [] for k in keys})[key].append(moved)
    if not parts or list(parts) == [None]:
        return [dict(series)]
    closest = place(series.get("closest")) if series.get("closest") else None
    total = max(1, sum(len(p["points"]) for p in parts.values()))
    count = int(series.get("count") or 0)
    out = []
    for mode, held in parts.items():
        part = {**series, **held, "mode": series.get("mode") or mode}
        part["firing_count"] = (
            len(held["firings"])
            if len(parts) > 1
            else series.get("firing_count", len(held["firings"]))
        )
        part["count"] = round(count * len(held["points"]) / total) if len(parts) > 1 else count
        part["closest"] = closest[1] if closest is not None and closest[0] == mode else None
        out.append(part)
    return out
