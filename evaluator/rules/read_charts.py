"""Charting what a rule reads (a rule that records no comparisons, such as a user's rule
written for smdebug): each tensor read becomes a series of its own (``Evidence.watch_reads``).

This sits on the rule's hot path, so it is paid by the step, not by the read, and no value is
ever read again for a chart:

* the steps are sampled as TensorBoard downsamples its scalars: a uniform sample of
  ``SAMPLED_STEPS`` steps (seeded, so a run charts the same steps every time), the first
  step, and the recent step (at least every ``RECENT_SECONDS``: a live report's chart trails
  the rule by about that much). Which steps is drawn *before* each step (``plan``: the draw
  never depends on what is read), so a step not sampled holds nothing while the rule
  evaluates it: its reads are only counted. When ``invoke_rule`` says how many steps the
  trial has (``expect``), the steps kept are selected among them as they come, and no step
  is held only to be replaced later (``_Reservoir``: 129 steps held of 2,000, against about
  460 for a reservoir that does not know the count); a run that grows past them goes on in
  a reservoir;
* a read of a sampled step is noted with a reference to what was read (``Evidence.note_read``:
  the array the rule got, or the reductions it read), at most ``MAX_READS_CHARTED`` per step;
* after the step (``ReadCharts.offer``) a sampled step's figures are computed at once
  (``evaluator.rules.read_figures``) and the references are let go: nothing a rule read is
  held from one step to the next, so the memory its values took is used again at the next
  step. A sampled step the rule fired at also joins a reservoir of firing steps as large; a
  step a reservoir lets go is dropped (the recent one when a later one replaces it). A
  firing at a step not sampled is not charted (the report names the firing steps; holding
  every step's reads to chart them cost the rule about 7 % of its time, bench/RESULTS.md).

An array the rule changes in place during the step it read it at is charted as changed (the
reference is the rule's own array: a copy would cost every read what the chart saves).

A series counts the steps at which its tensor was read. Reads of another step than the one
evaluated (a window, the step before) are counted as reads but not charted: the observer does
not say which mode such a step number counts in. ``offer`` without a ``plan`` (reads outside
a step's evaluation) draws at the step itself and keeps the last step as the recent one.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from evaluator.rules.read_figures import Scratch, StepFigures, figures
from evaluator.rules.series import Point, _decimate, json_number

__all__ = ["MAX_READS_CHARTED", "SAMPLED_STEPS", "ReadCharts"]

MAX_READS_CHARTED = 200  # reads kept per step of a rule that watches its reads
SAMPLED_STEPS = 128  # steps of the reservoir (besides the first, the last and the firings)
HELD_BYTES = 256 * 1024 * 1024  # bytes of arrays held for one step's charts, at most
RECENT_SECONDS = 1.0  # a step's reads are held at least this often (the recent step)


class _Kept:
    """A step kept: its figures, computed when it was offered."""

    __slots__ = ("figures", "mode", "step")

    def __init__(self, step: int, mode: str | None, found: StepFigures) -> None:
        self.step, self.mode, self.figures = step, mode, found


class _Reservoir:
    """Which items a reservoir of ``size`` takes, drawn by ``rng``: after each item, a uniform
    sample of the items seen so far (the sample of Algorithm R, TensorBoard's).

    When ``expect(n)`` said, before the first item, that ``n`` items are known to come (more
    than ``size``), the first ``n`` are selected as Knuth's Algorithm S selects: each item is
    taken or not as it comes, ``size`` of them in all, and an item taken stays. A reservoir
    that does not know ``n`` takes about ``size * (1 + ln(n / size))`` of them, most to be
    replaced. Past the known items (or without them), it goes on as Algorithm L does: the
    items skipped cost one comparison each."""

    __slots__ = ("_filled", "_known", "_next", "_rng", "_w", "seen", "size")

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size, self._rng, self.seen = size, rng, 0
        self._known = 0  # the items known to come (``expect``)
        self._filled = 0  # slots taken
        self._w, self._next = 1.0, -1  # Algorithm L: the largest key kept, the next item taken

    def expect(self, known: int) -> None:
        """``known`` items will come (said before the first one; ignored after it)."""
        if self.seen == 0 and known > self.size > 0:
            self._known = known

    def take(self) -> int:
        """The slot the next item takes, -1 for none."""
        self.seen += 1
        if not self.size:
            return -1
        if self.seen <= self._known:
            return self._select()
        if self._filled < self.size:
            self._filled += 1
            if self._filled == self.size:  # the largest of ``size`` uniform keys
                self._begin(math.exp(math.log(self._rng.random() or 1e-300) / self.size))
            return self._filled - 1
        if self.seen != self._next:
            return -1
        self._w *= math.exp(math.log(self._rng.random() or 1e-300) / self.size)
        self._next = self.seen + self._skip()
        return self._rng.randrange(self.size)

    def _select(self) -> int:
        """Algorithm S: the item is taken with the chance (slots left) / (items left)."""
        left = self._known - self.seen + 1
        slot = -1
        if self._rng.random() * left < self.size - self._filled:
            slot = self._filled
            self._filled += 1
        if self.seen == self._known:  # full: the size-th smallest of ``known`` uniform keys
            self._begin(self._rng.betavariate(self.size, self._known - self.size + 1))
        return slot

    def _begin(self, largest: float) -> None:
        """Go on as Algorithm L, the reservoir full and ``largest`` its largest key."""
        self._w = largest or 1e-300
        self._next = self.seen + self._skip()

    def _skip(self) -> int:
        return int(math.log(self._rng.random() or 1e-300) / math.log1p(-self._w)) + 1


def _put(sample: list[_Kept], slot: int, kept: _Kept) -> None:
    """Put ``kept`` in ``slot`` of a reservoir (an entry it replaces is let go)."""
    if slot < len(sample):
        sample[slot] = kept
    else:
        sample.append(kept)


class ReadCharts:
    """The sampled steps of what one rule read, and how many steps read each tensor. Written
    by the rule's thread (``offer``), read by ``series``: the owning ``Evidence`` locks both."""

    def __init__(self, sampled: int = SAMPLED_STEPS) -> None:
        self.sampled = sampled
        rng = random.Random(0)
        self._steps = _Reservoir(sampled, rng)
        self._firings = _Reservoir(sampled, rng)
        self._reservoir: list[_Kept] = []
        self._first: _Kept | None = None
        self._fired_sample: list[_Kept] = []  # a reservoir of the firing steps
        self._last: _Kept | None = None  # the recent step, until a later one replaces it
        self._scratch = Scratch()  # where the figures are computed, step after step
        self._counts: dict[str | None, Counter[str]] = {}
        self._run_names: list[str] = []  # the tensors of the run of steps that read the same
        self._run_mode: str | None = None
        self._run_unique = True
        self._repeats = 0
        self._plan: tuple[int, int, bool] | None = None  # a step planned: its slot, first
        self._held_at = -math.inf  # when the last step planned to hold its reads began

    def expect(self, steps: int) -> None:
        """Before the first step: ``steps`` steps are about to be evaluated (those the trial
        already has). The steps to keep are then selected among them as they come, without
        holding the reads of steps that would be replaced (``_Reservoir``); fewer steps
        evaluated than said (steps skipped) keep fewer, more (a run still growing) go on in
        the reservoir."""
        self._steps.expect(steps)

    def plan(self, step: int, now: float) -> bool:
        """Before ``step`` is evaluated (``now``: a monotonic clock, in seconds): whether
        what it reads is needed. The step reservoir draws for it here (the draw never depends on
        what is read), so a step it will not keep holds no arrays while it is evaluated: it
        is needed when the reservoir takes it, when it is the first step, or when
        ``RECENT_SECONDS`` have passed since the last step needed (the recent step, kept as
        the last until a later one replaces it: a live report's chart trails the rule by
        about that much). The ``offer`` of ``step`` follows this plan."""
        slot = self._steps.take()
        first = self._steps.seen == 1
        self._plan = (step, slot, first)
        if slot >= 0 or first or now - self._held_at >= RECENT_SECONDS:
            self._held_at = now
            return True
        return False

    def offer(
        self,
        step: int,
        mode: str | None,
        names: list[str],
        values: list[Any],
        fired: bool,
        held: bool = True,
    ) -> None:
        """The reads of one evaluated ``step`` in ``mode``: ``names[i]`` read as ``values[i]``
        (not ``held``: what was read was not kept, as ``plan`` said; the reads are counted).
        The lists stay the caller's: a step kept keeps its figures, computed here, and
        nothing of the lists (a step not held, of the same tensors as the step before,
        copies nothing)."""
        if names != self._run_names or mode != self._run_mode:  # (the same tensors, mostly)
            self._count_run()
            self._run_names, self._run_mode = names.copy(), mode
            self._run_unique = len(set(names)) == len(names)
        self._repeats += 1
        planned, self._plan = self._plan, None
        if planned is not None and planned[0] == step:
            slot, first = planned[1], planned[2]
        else:  # (a step read that was not planned: outside an evaluation)
            slot = self._steps.take()
            first = self._steps.seen == 1
        if not held:
            return  # a step planned not to hold its reads (``plan``): counted
        fired_slot = self._firings.take() if fired else -1  # a reservoir of their own
        found = figures(names, values, unique=self._run_unique, scratch=self._scratch)
        kept = _Kept(step, mode, found)
        if slot < 0 and fired_slot < 0 and not first:
            self._last = kept  # held until a later step replaces it
            return
        self._last = None
        if first:
            self._first = kept
        if fired_slot >= 0:
            _put(self._fired_sample, fired_slot, kept)
        if slot >= 0:
            _put(self._reservoir, slot, kept)

    def _count_run(self) -> None:
        """Count the steps of the run of steps that read the same tensors."""
        if self._repeats:
            mode, names = self._run_mode, self._run_names
            counts = self._counts.setdefault(mode, Counter())
            for name in set(names):
                counts[name] += self._repeats
        self._repeats = 0

    def offer_pending(
        self,
        names: list[str],
        values: list[Any],
        steps: list[int],
        step: int | None,
        fired: bool,
        mode_of: Callable[[int], str | None],
    ) -> None:
        """``offer`` the reads (``names[i]`` read as ``values[i]``) of the evaluated ``step``
        in its mode (``mode_of``): all of them when ``steps`` is empty, else those read at
        ``steps[i] == step`` (at each step read, when ``step`` is None). Never raises."""
        by_step: dict[int, tuple[list[str], list[Any]]] = {}
        if not steps and step is not None:
            by_step[step] = (names, values)  # the reads of a step's evaluation
        for name, s, what in zip(names, steps, values):
            if step is None or s == step:
                found = by_step.setdefault(s, ([], []))
                found[0].append(name)
                found[1].append(what)
        for read_step, (read, what) in by_step.items():
            try:
                self.offer(read_step, mode_of(read_step), read, what, fired)
            except Exception:  # a chart is a help; never fail a rule over it
                continue

    def names(self) -> set[str]:
        """The tensors whose reads were offered."""
        found = {name for counts in self._counts.values() for name in counts}
        return found | set(self._run_names)

    def __len__(self) -> int:
        self._count_run()
        return sum(len(c) for c in self._counts.values())

    def series(
        self, limit: int | None = None, room: int = 10**9
    ) -> tuple[list[dict[str, Any]], int]:
        """The series (``Series.to_dict``'s fields), at most ``room`` of them, each cut to about
        ``limit`` points besides the first, last and firing steps; and how many reads the
        series left out held."""
        self._count_run()
        marks = [e for e in (self._first, *self._fired_sample) if e is not None]
        kept = list({id(e): e for e in (*marks, *self._reservoir)}.values())
        if self._last is not None:
            kept.append(self._last)
        marked = {entry.step for entry in marks}
        if kept:
            marked.add(max(entry.step for entry in kept))
        by_key: dict[tuple[str, str, str | None], dict[int, float]] = {}
        for entry in kept:
            for name, quantity, value in entry.figures.rows():
                by_key.setdefault((name, quantity, entry.mode), {}).setdefault(entry.step, value)
        out: list[dict[str, Any]] = []
        left_out = 0
        for (name, quantity, mode), points in sorted(by_key.items(), key=_order):
            count = self._counts.get(mode, Counter()).get(name, 0)
            if len(out) >= room:
                left_out += count
                continue
            out.append(_series_dict(name, quantity, mode, count, _cut(points, marked, limit)))
        return out, left_out


def _order(item: tuple[tuple[str, str, str | None], Any]) -> tuple[str, str, str]:
    name, quantity, mode = item[0]
    return (name, quantity, mode or "")


def _cut(points: dict[int, float], marked: set[int], limit: int | None) -> list[Point]:
    """The points in step order, about ``limit`` of them (lowest and highest of runs) besides
    the marked steps."""
    ordered = sorted(points.items())
    if limit is None or len(ordered) <= limit:
        return ordered
    kept = set(_decimate(ordered, max(1, limit // 2)))
    kept.update((s, v) for s, v in ordered if s in marked)
    return sorted(kept, key=lambda p: p[0])


def _series_dict(
    name: str, quantity: str, mode: str | None, count: int, points: list[Point]
) -> dict[str, Any]:
    return {
        "tensors": [name],
        "quantity": quantity,
        "mode": mode,
        "parameter": None,
        "comparison": None,
        "threshold": None,
        "threshold_changes": [],
        "count": count,
        "points": [[s, json_number(v)] for s, v in points],
        "firings": [],
        "firing_count": 0,
        "closest": None,
    }
