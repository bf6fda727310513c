"""What the TensorBoard source keeps per folder and step until it hands steps on: events
applied as TensorBoard applies them (a repeated step's last value wins; ``SessionLog.START``
and, in old files, a step going back purge orphaned steps), a histogram's held reductions
(named as smdebug names saved reductions), the step range. No I/O."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.formats.keys import reduction_tensor_name
from evaluator.formats.tb_summary import Histogram, ParsedEvent
from evaluator.modes import ModeKeys
from evaluator.trial.tb_layout import TagCollections

__all__ = [
    "COUNT",
    "HISTOGRAM_STATS",
    "Folder",
    "Value",
    "apply_event",
    "apply_scalar",
    "histogram_records",
    "in_range",
    "purge",
]

HISTOGRAM_STATS = "histogram"  # the buckets, [k, 3]: a reduction no smdebug hook saves
COUNT = "count"
Value = np.ndarray | np.generic | Histogram | float


@dataclass
class Folder:
    """One folder of the run: its mode, what its events told so far, its pending steps."""

    mode: ModeKeys
    plugin_of: dict[str, str] = field(default_factory=dict)
    file_version: float | None = None
    recent_step: int = -1
    # step -> tag -> value (a numpy scalar or array, a Histogram, or a float32 scalar held
    # as a Python float), not handed on yet
    pending: dict[int, dict[str, Value]] = field(default_factory=dict)


def apply_scalar(folder: Folder, step: int, tag: str, value: float) -> None:
    """``apply_event`` of a summary event of one scalar (the fast path): ``value`` is a
    float32 ``simple_value`` held as a Python float (``ValueStore`` gives it as float32)."""
    version = folder.file_version
    if version is None or version < 2:
        if step < folder.recent_step:
            purge(folder.pending, step, {tag})  # TensorBoard's old-file rule
        else:
            folder.recent_step = step
    if step < 0:
        return  # no trial step can be negative
    at = folder.pending.get(step)
    if at is None:
        at = folder.pending[step] = {}
    at[tag] = value  # a repeated step: the value written last wins


def apply_event(folder: Folder, event: ParsedEvent, tags: TagCollections) -> None:
    """Apply one decoded event to ``folder``'s pending steps; its tags are filed in ``tags``."""
    what, step, data = event.what, event.step, event.data
    if what == "file_version":
        with contextlib.suppress(ValueError):
            folder.file_version = float(event.file_version.rsplit(":", 1)[-1])
    if folder.file_version is not None and folder.file_version >= 2:
        if what == "start":
            purge(folder.pending, step, None)
    elif what == "summary" and step < folder.recent_step:
        purge(folder.pending, step, {d.tag for d in data})  # TensorBoard's old-file rule
    else:
        folder.recent_step = step
    if what != "summary" or step < 0 or not data:
        return  # no trial step can be negative
    at = folder.pending.get(step)
    if at is None:
        at = folder.pending[step] = {}
    for datum in data:
        at[datum.tag] = datum.value  # a repeated step: the value written last wins
        tags.add(datum.tag, datum.kind)


def histogram_records(tag: str, h: Histogram) -> Iterable[tuple[str, Any]]:
    """(reduction tensor name, held value) of every reduction of ``h``, its count, its exact
    statistics and its buckets."""
    for (name, is_abs), value in h.reductions().items():
        yield _reduction_name(tag, name, is_abs), np.float64(value)
    yield _reduction_name(tag, COUNT, False), np.float64(h.count)
    stats = [h.min, h.max, h.count, _nan(h.sum), _nan(h.sum_squares)]
    yield _reduction_name(tag, HISTOGRAM_STATS + "_stats", False), np.asarray(stats, np.float64)
    yield _reduction_name(tag, HISTOGRAM_STATS, False), h.buckets


# One string per reduction name, shared by every step (a log has few histogram tags).
_REDUCTION_NAMES: dict[tuple[str, str, bool], str] = {}


def _reduction_name(tag: str, name: str, is_abs: bool) -> str:
    key = (tag, name, is_abs)
    found = _REDUCTION_NAMES.get(key)
    if found is None:
        found = reduction_tensor_name(tag, name, abs=is_abs)
        if len(_REDUCTION_NAMES) < 65536:
            _REDUCTION_NAMES[key] = found
    return found


def _nan(x: float | None) -> float:
    return float("nan") if x is None else x


def purge(pending: dict[int, dict[str, Any]], step: int, tags: set[str] | None) -> None:
    """Drop from ``pending`` what was logged at steps ``>= step``: every tag, or ``tags``."""
    for s in [s for s in pending if s >= step]:
        if tags is None:
            del pending[s]
        else:
            for tag in tags:
                pending[s].pop(tag, None)


def in_range(step: int, range_steps: tuple[int | None, int | None]) -> bool:
    """Whether ``step`` is in ``[begin, end)`` (either end open when None)."""
    begin, end = range_steps
    return (begin is None or begin <= step) and (end is None or step < end)
