"""What the TensorBoard source keeps per folder: its tags' columns (``Series``), filled as
TensorBoard applies events (a repeated step's last value wins; ``SessionLog.START`` and, in
old files, a step going back purge orphaned steps), and what changed since the steps were last
handed on. No I/O."""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field

import numpy as np

from evaluator.formats.metric_names import MAX_PHASED_STEP
from evaluator.formats.tensorboard.frames import Scalars
from evaluator.formats.tensorboard.summary import ParsedEvent
from evaluator.modes import ModeKeys
from evaluator.sources.tensorboard.columns import Series
from evaluator.sources.tensorboard.layout import TagCollections

__all__ = ["MAX_STEP", "Folder", "apply_event", "apply_scalars", "distinct", "in_range"]

#: The largest event step read (``MAX_PHASED_STEP``): an event at a larger step is left out,
#: and told (``Folder.refused``).
MAX_STEP = MAX_PHASED_STEP


@dataclass
class Folder:
    """One folder of the run: its mode, what its events told so far, its tags' columns, and
    what changed since the last hand-on (tags, steps logged, whether anything was purged)."""

    mode: ModeKeys
    plugin_of: dict[str, str] = field(default_factory=dict)
    file_version: float | None = None
    recent_step: int = -1
    series: dict[str, Series] = field(default_factory=dict)
    order: int = 0  # records applied: the order of the next row
    changed: set[str] = field(default_factory=set)
    new_steps: list[np.ndarray] = field(default_factory=list)
    new_step: list[int] = field(default_factory=list)
    purged: bool = False
    refused: list[int] = field(default_factory=list)  # steps past MAX_STEP met, not yet told

    @property
    def ordered_by_step(self) -> bool:
        """Whether a step going back is just a repeated step (file version 2 and later);
        else TensorBoard's old-file rule purges, so rows are applied one by one in order."""
        return self.file_version is not None and self.file_version >= 2

    def tag(self, tag: str) -> Series:
        found = self.series.get(tag)
        if found is None:
            found = self.series[tag] = Series()
        self.changed.add(tag)
        return found

    def purge(self, step: int, tags: set[str] | None) -> None:
        """Drop what was logged at steps ``>= step``: every tag's, or ``tags``'."""
        for tag in self.series if tags is None else tags:
            held = self.series.get(tag)
            if held is not None and len(held):
                held.purge(step)
                self.changed.add(tag)
        self.purged = True

    def take_new_steps(self) -> np.ndarray:
        """The sorted steps logged since the last call (every step still held after a purge)."""
        if self.purged:
            parts = [s.snapshot().steps for s in self.series.values()]
        else:
            parts = [np.concatenate(self.new_steps) if self.new_steps else np.zeros(0, np.int64)]
            parts.append(np.array(self.new_step, np.int64))
        self.new_steps, self.new_step, self.purged = [], [], False
        return distinct(parts)


def distinct(parts: list[np.ndarray]) -> np.ndarray:
    """The sorted distinct steps of ``parts``. The usual case is cheap: parts whose steps
    only grow are thinned without sorting, and a short part whose steps are all in a long
    one (a histogram logged at a step of the scalars) adds nothing."""
    thin = sorted((_thinned(p) for p in parts if len(p)), key=len, reverse=True)
    if not thin:
        return np.zeros(0, np.int64)
    steps = thin[0]
    for extra in thin[1:]:
        at = np.minimum(np.searchsorted(steps, extra), len(steps) - 1)
        missing = extra[steps[at] != extra]
        if len(missing):
            steps = np.union1d(steps, missing)
    return steps


def _thinned(steps: np.ndarray) -> np.ndarray:
    """``steps`` sorted, each once."""
    if len(steps) > 1 and bool(np.all(steps[1:] >= steps[:-1])):
        changes = np.ones(len(steps), bool)
        changes[1:] = steps[1:] != steps[:-1]
        return steps[changes]
    return np.unique(steps)


def apply_scalars(
    folder: Folder, scalars: Scalars, lo: int, hi: int, base: int, tags: TagCollections
) -> None:
    """Apply records ``lo:hi`` of ``scalars`` (all one-scalar events, read at once) to
    ``folder``; ``base`` is the order of record 0."""
    if hi <= lo:
        return
    ok = scalars.ok[lo:hi]
    steps, ids = scalars.steps[lo:hi], scalars.tag_ids[lo:hi]
    values = scalars.values[lo:hi]
    order = np.arange(base + lo, base + hi, dtype=np.int64)
    if not ok.all():  # the other records are applied as events
        steps, ids, values, order = steps[ok], ids[ok], values[ok], order[ok]
    names = scalars.tags
    if not folder.ordered_by_step:  # one by one, as events (old files)
        rows = zip(steps.tolist(), ids.tolist(), values, order.tolist(), strict=True)
        for step, tag_id, value, at in rows:
            _apply_one(folder, step, names[tag_id], value, at, tags)
        return
    kept = steps >= 0  # no trial step can be negative
    if not kept.all():
        steps, ids, values, order = steps[kept], ids[kept], values[kept], order[kept]
    if not len(steps):
        return
    if bool(np.all(ids == ids[0])):
        tags.add(names[int(ids[0])], "scalar")
        folder.tag(names[int(ids[0])]).extend_scalars(steps, order, values)
    else:  # one sort groups the rows of each tag (a mask per tag would cost tags x rows)
        by_tag = np.argsort(ids, kind="stable")
        sorted_ids = ids[by_tag]
        bounds = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
        edges = [0, *bounds.tolist(), len(by_tag)]
        for lo, hi in itertools.pairwise(edges):
            mine = by_tag[lo:hi]
            tag = names[int(sorted_ids[lo])]
            tags.add(tag, "scalar")
            folder.tag(tag).extend_scalars(steps[mine], order[mine], values[mine])
    folder.new_steps.append(steps)


def _apply_one(
    folder: Folder, step: int, tag: str, value: np.generic, order: int, tags: TagCollections
) -> None:
    if step < folder.recent_step:
        folder.purge(step, {tag})  # TensorBoard's old-file rule
    else:
        folder.recent_step = step
    if step >= 0:
        tags.add(tag, "scalar")
        folder.tag(tag).add(step, order, value)
        folder.new_step.append(step)


def apply_event(folder: Folder, event: ParsedEvent, order: int, tags: TagCollections) -> None:
    """Apply one decoded event (the ``order``-th record of the folder) to ``folder``; its
    tags are filed in ``tags``."""
    what, step, data = event.what, event.step, event.data
    if step > MAX_STEP:
        folder.refused.append(step)  # no global step can be made of it; never a purge either
        return
    if what == "file_version":
        with contextlib.suppress(ValueError):
            folder.file_version = float(event.file_version.rsplit(":", 1)[-1])
    if folder.ordered_by_step:
        if what == "start":
            folder.purge(step, None)
    elif what == "summary" and step < folder.recent_step:
        folder.purge(step, {d.tag for d in data})  # TensorBoard's old-file rule
    else:
        folder.recent_step = step
    if what != "summary" or step < 0 or not data:
        return  # no trial step can be negative
    for datum in data:
        folder.tag(datum.tag).add(step, order, datum.value)  # the row logged last wins
        tags.add(datum.tag, datum.kind)
    folder.new_step.append(step)


def in_range(step: int, range_steps: tuple[int | None, int | None]) -> bool:
    """Whether ``step`` is in ``[begin, end)`` (either end open when None)."""
    begin, end = range_steps
    return (begin is None or begin <= step) and (end is None or step < end)
