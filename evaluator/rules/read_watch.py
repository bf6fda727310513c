"""What a rule reads, counted for its verdict and charted for its report: the read side of
``Evidence`` (``evaluator.rules.evidence``), a mixin of it.

Every read is counted (a rule that read nothing checked nothing). A rule that records no
comparisons (``watch_reads``: a user's rule) has its reads charted. That runs for every value
such a rule reads, so a read of the step evaluated costs about what counting it costs: the
watching note (a closure) appends the name and, only at a step the read charts will keep
(``ReadCharts.plan``, drawn before the step), a reference to what was read. A read of another
step is counted at once. Every ``_SPILL_EVERY`` reads of a step (fewer when the arrays are
large: the arrays read between two checks hold at most about 1/64 of ``HELD_BYTES``),
``_spill`` keeps the bounds: at most ``MAX_READS_CHARTED`` reads and ``HELD_BYTES`` of arrays
are held. When the step ends (``chart_reads``), ``evaluator.rules.read_charts`` counts the
step's reads and, at a step it planned to keep, computes its figures; the references are
then let go.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules.read_charts import HELD_BYTES, MAX_READS_CHARTED, ReadCharts

__all__ = ["ReadWatch"]

_log = logging.getLogger(__name__)
_ndarray = np.ndarray
_NOT_CHARTED = object()  # ``_now`` while no read is charted
_SPILL_EVERY = 64  # reads of a step noted between two checks of the bounds, at most
_TENSORS_TOLD_APART = 10_000  # distinct tensors counted, at most
# A mode as the charts name it (a dict: ``Enum.name`` is a Python-level property, and this
# is looked up at every step).
_MODE_NAMES = {mode: None if mode is ModeKeys.GLOBAL else mode.name for mode in ModeKeys}


class ReadWatch:
    """The reads of one rule (``Evidence`` mixes it in, and gives ``_lock`` and ``_mode_of``)."""

    _lock: threading.Lock
    _mode_of: Callable[[int], tuple[ModeKeys | None, int | None]]

    def _init_reads(self) -> None:
        self._reads = 0  # counted (the reads still noted are counted when charted)
        self._read_tensors: set[str] = set()
        self._watching = False  # chart what the rule reads (watch_reads)
        self._now: object = None  # the step evaluated, None (none: any step), or _NOT_CHARTED
        self._holding = True  # keep what is read (``ReadCharts.plan`` says, step by step)
        # The reads of the step evaluated: names, and what was read when the step is held (else
        # nothing), in lists the watching note appends to (never rebound: the note holds them).
        self._names: list[str] = []
        self._values: list[Any] = []
        # Reads outside a step's evaluation (a rule's ``invoke_at_end``): with their steps.
        self._loose: tuple[list[str], list[int], list[Any]] = ([], [], [])
        self._checked = 0  # the noted reads the bounds were checked for
        self._held = 0  # bytes of the arrays among them
        self._largest = 0  # bytes of the largest array read so far
        self._every = 1  # reads between two checks (1 until an array's size is known)
        self._spill_at = 1
        self._read_charts = ReadCharts()

    def watch_reads(self) -> None:
        """Chart what the rule reads (a rule that records no comparisons: a user's rule):
        ``chart_reads`` offers each step's reads to the read charts."""
        self._watching = True
        names, add_name, add_value = self._names, self._names.append, self._values.append
        tensors, spill, loose, watch = self._read_tensors, self._spill, self._note_loose, self

        def note_watched(name: str, step: int, value: Any = None) -> None:
            now = watch._now
            if step == now:  # a read of the step evaluated
                add_name(name)
                if watch._holding:  # (a step the charts keep: what was read, beside its name)
                    add_value(value)
                if len(names) >= watch._spill_at:
                    spill()
            elif now is None:  # outside a step's evaluation
                loose(name, step, value)
            else:  # another step, or the fetch of the required tensors: counted
                watch._reads += 1
                if len(tensors) < _TENSORS_TOLD_APART:
                    tensors.add(name)

        self.note_read = note_watched  # type: ignore[method-assign]

    def expect_steps(self, count: Callable[[], int]) -> None:
        """``count()`` steps are about to be evaluated (``invoke_rule`` says, before the
        first; counted only when the reads are charted): the read charts sample among them
        without holding the reads of steps they would let go (``ReadCharts.expect``)."""
        if self._watching:
            self._read_charts.expect(count())

    def evaluating(self, step: int | None, *, charted: bool = True) -> None:
        """The rule is about to evaluate global ``step``: its reads of that step are charted
        (``Rule.invoke`` calls this; reads of other steps are counted, not charted; with
        ``charted=False`` none is: the framework's fetch of the required tensors). Reads left
        from a step whose evaluation raised are charted at that step first."""
        if self._names or self._loose[0]:
            self.chart_reads(self._now if isinstance(self._now, int) else None)
        self._now = step if charted else _NOT_CHARTED
        self._holding = True
        if charted and step is not None and self._watching:  # (series() reads no plan)
            self._holding = self._read_charts.plan(step, time.monotonic())

    def chart_reads(self, step: int | None = None, fired: bool = False) -> None:
        """Offer the reads noted since the last call (at global ``step``, evaluated, the rule
        ``fired`` there or not; None: at the steps read) to the read charts
        (``evaluator.rules.read_charts``). Never raises."""
        names, values = self._names, self._values
        now, held = self._now, self._holding
        self._now, self._holding = None, True
        self._checked = self._held = 0
        self._spill_at = self._every
        if self._loose[0]:
            self._chart_loose(step, fired)
        if not names:
            return
        if isinstance(now, int):  # (names hold reads of ``now`` only)
            mode = self._mode_name(now)
            with self._lock:
                try:  # (``offer`` copies what it keeps of the lists)
                    self._read_charts.offer(now, mode, names, values, fired, held)
                except Exception:  # a chart is a help; never fail a rule over it
                    _log.debug("reads at step %s not charted", now, exc_info=True)
        count = len(names)
        names.clear()
        values.clear()
        self._reads += count  # (after the clear: ``reads`` never counts a read twice)

    def _chart_loose(self, step: int | None, fired: bool) -> None:
        """Offer the reads noted outside a step's evaluation (at ``step`` only, or at each
        step read when None)."""
        names, steps, values = (list(part) for part in self._loose)
        for part in self._loose:
            part.clear()
        self._reads += len(names)
        with self._lock:
            try:
                self._read_charts.offer_pending(names, values, steps, step, fired, self._mode_name)
            except Exception:  # a chart is a help; never fail a rule over it
                _log.debug("reads at step %s not charted", step, exc_info=True)

    def _note_loose(self, name: str, step: int, value: Any) -> None:
        """A read outside a step's evaluation: kept with its step (at most
        ``MAX_READS_CHARTED`` of them, the rest counted)."""
        loose_names, loose_steps, loose_values = self._loose
        if len(loose_names) < MAX_READS_CHARTED:
            loose_names.append(name)
            loose_steps.append(step)
            loose_values.append(value)
            return
        self._reads += 1
        if len(self._read_tensors) < _TENSORS_TOLD_APART:
            self._read_tensors.add(name)

    def _spill(self) -> None:
        """Keep the bounds of the step's reads: past ``MAX_READS_CHARTED`` a read is counted
        and let go; past ``HELD_BYTES`` of arrays it is kept without what was read. Sets how
        many reads may be noted before the next check (fewer when the arrays are large)."""
        names, values = self._names, self._values
        if len(names) > MAX_READS_CHARTED:
            self._reads += len(names) - MAX_READS_CHARTED
            if len(self._read_tensors) < _TENSORS_TOLD_APART:
                self._read_tensors.update(names[MAX_READS_CHARTED:])
            del names[MAX_READS_CHARTED:], values[MAX_READS_CHARTED:]
            self._checked = min(self._checked, MAX_READS_CHARTED)
        held, largest = self._held, self._largest
        for i in range(self._checked, len(values)):
            value = values[i]
            if type(value) is _ndarray:
                size = value.nbytes
                held += size
                largest = max(largest, size)
                if held > HELD_BYTES:
                    values[i] = None  # counted, not charted
        if largest > self._largest or self._every == 1:
            self._largest = largest
            self._every = max(1, min(_SPILL_EVERY, HELD_BYTES // (64 * max(largest, 1))))
        self._held, self._checked = held, len(values)
        self._spill_at = len(names) + self._every

    def _tensors_read(self) -> int:
        """How many tensors were read (at most about 10,000 are told apart)."""
        noted = set(self._names) | set(self._loose[0])
        return len(self._read_tensors | self._read_charts.names() | noted)

    def _mode_name(self, step: int) -> str | None:
        mode = self._mode_of(step)[0]
        return None if mode is None else _MODE_NAMES[mode]

    def note_read(self, name: str, step: int, value: Any = None) -> None:
        """A tensor was read, and ``value`` is what was read (``evaluator.engine.reads`` calls
        this, in the rule's thread): counted. ``watch_reads`` puts the watching note in its
        place."""
        self._reads += 1
        if len(self._read_tensors) < _TENSORS_TOLD_APART:
            self._read_tensors.add(name)
