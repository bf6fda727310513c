"""A trial's summary: what a person wants to know before writing a rule against it.

``format_summary`` is for a terminal: every name from the trial (tensors, collections,
workers, the path) has its control characters, newline and tab included, shown as ``\\xNN``
(``evaluator.redaction.escape_controls``), so a tag name cannot clear the screen, ring the bell
or forge a line."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.redaction import escape_controls

__all__ = ["TrialSummary", "format_summary", "summarize"]


@dataclass(frozen=True)
class TrialSummary:
    path: str
    training_ended: bool
    num_workers: int
    workers: list[str]
    steps: int
    first_step: int | None
    last_step: int | None
    steps_per_mode: dict[str, int]
    collections: dict[str, int]  # name -> tensors in the trial that belong to it
    tensors: dict[str, int] = field(default_factory=dict)  # name -> steps saved
    kind: str = "smdebug"  # the format's name: "tensorboard", or a plug-in's
    mapping: str | None = None  # how the format mapped the location (docs/tensorboard.md)
    described: str | None = None  # the format's own sentence for its kind
    # mode -> [first, last] step the writer logged, for a trial whose global steps are not
    # the writer's (a TensorBoard run with phases: ``Trial.writer_step``); else None
    logged_steps: dict[str, list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        found = dict(self.__dict__)
        if found["logged_steps"] is None:  # only where the writer's steps are not global
            del found["logged_steps"]
        return found


def summarize(trial: Any) -> TrialSummary:
    # An empty collection is normal here; smdebug's "no tensor matches" warning would be noise.
    trial_log = logging.getLogger("evaluator.trial")
    level = trial_log.level
    trial_log.setLevel(logging.ERROR)
    try:
        return _summarize(trial)
    finally:
        trial_log.setLevel(level)


def _summarize(trial: Any) -> TrialSummary:
    steps = trial.steps()
    per_mode = {m.name: len(trial.steps(mode=m)) for m in trial.modes()}
    if not per_mode and steps:
        per_mode = {ModeKeys.GLOBAL.name: len(steps)}
    names = trial.tensor_names()
    said = trial.describe() if hasattr(trial, "describe") else {}  # the format's own words
    return TrialSummary(
        path=trial.path,
        training_ended=trial.training_ended(),
        num_workers=trial.num_workers,
        workers=trial.workers(),
        steps=len(steps),
        first_step=steps[0] if steps else None,
        last_step=steps[-1] if steps else None,
        steps_per_mode=per_mode,
        collections={c: len(trial.tensor_names(collection=c)) for c in sorted(trial.collections())},
        tensors={n: len(trial.tensor(n).steps()) for n in names},
        kind=getattr(trial, "kind", "smdebug"),
        mapping=None if said.get("mapping") is None else str(said["mapping"]),
        described=None if said.get("kind") is None else str(said["kind"]),
        logged_steps=_logged_steps(trial, steps),
    )


def _logged_steps(trial: Any, steps: list[int]) -> dict[str, list[int]] | None:
    """Per mode, the first and last step the writer logged, when those are not the global
    steps (``Trial.writer_step`` answers with a mode)."""
    shown = getattr(trial, "writer_step", None)
    if shown is None or not steps or shown(steps[0]).mode is None:
        return None
    found: dict[str, list[int]] = {}
    for step in steps:
        at = shown(step)
        name = at.mode.name if at.mode is not None else ModeKeys.GLOBAL.name
        found.setdefault(name, [at.step, at.step])[1] = at.step
    return found


def _shown(text: object) -> str:
    return escape_controls(str(text), line_breaks=True)


def format_summary(s: TrialSummary) -> str:
    step_range = f"{s.first_step}..{s.last_step}" if s.steps else "none"
    logged = s.logged_steps or {}
    modes = ", ".join(
        f"{_shown(m)} {n}"
        + (f" (logged steps {logged[m][0]}..{logged[m][1]})" if m in logged else "")
        for m, n in s.steps_per_mode.items()
    )
    collections = ", ".join(f"{_shown(c)} ({n})" for c, n in s.collections.items())
    lines = [
        f"trial           {_shown(s.path)}",
        f"kind            {_shown(s.described or s.kind)}",
        *([f"mapping         {_shown(s.mapping)}"] if s.mapping else []),
        f"training ended  {'yes' if s.training_ended else 'no (still being written, or no end marker)'}",
        f"workers         {s.num_workers}: {', '.join(_shown(w) for w in s.workers)}",
        f"steps           {s.steps} (global steps {step_range})",
        "steps per mode  " + (modes or "none"),
        "collections     " + (collections or "none"),
        f"tensors         {len(s.tensors)}",
    ]
    tensors = [(_shown(n), k) for n, k in s.tensors.items()]
    width = max((len(n) for n, _ in tensors), default=0)
    lines += [f"  {n.ljust(width)}  {k} step{'s' if k != 1 else ''}" for n, k in tensors]
    return "\n".join(lines)
