"""What a rule reads, counted for its verdict and charted for its report: the read side of
``Evidence`` (``evaluator.rules.evidence``), a mixin of it.

Every read is counted (a rule that read nothing checked nothing). A rule that records no
comparisons (``watch_reads``: a user's rule) has its reads charted: ``note_read`` keeps the
name and a reference to what was read, for the step being evaluated only, until the step ends
(``chart_reads``), when ``evaluator.rules.read_charts`` samples the step and computes figures
for the steps it keeps. This runs for every value a rule reads, so it is kept to appends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules.read_charts import HELD_BYTES, MAX_READS_CHARTED, ReadCharts

__all__ = ["ReadWatch"]

_log = logging.getLogger(__name__)
_ndarray = np.ndarray
_NOT_CHARTED = object()  # ``_now`` while no read is charted


class ReadWatch:
    """The reads of one rule (``Evidence`` mixes it in, and gives ``_lock`` and ``_mode_of``)."""

    _lock: threading.Lock
    _mode_of: Callable[[int], tuple[ModeKeys | None, int | None]]

    def _init_reads(self) -> None:
        self._reads = 0
        self._read_tensors: set[str] = set()
        self._watching = False  # chart what the rule reads (watch_reads)
        # The reads to chart: names, what was read, the bytes of arrays held, and the steps
        # read (only outside a step's evaluation: within it, reads of ``_now`` are kept).
        self._now: object = None  # the step evaluated, None (any), or _NOT_CHARTED
        self._names: list[str] = []
        self._values: list[Any] = []
        self._held = 0
        self._read_at: list[int] = []
        self._read_charts = ReadCharts()

    def watch_reads(self) -> None:
        """Chart what the rule reads (a rule that records no comparisons: a user's rule):
        ``chart_reads`` offers each step's reads to the read charts."""
        self._watching = True
        self.note_read = self._note_watched  # type: ignore[method-assign]

    def evaluating(self, step: int | None, *, charted: bool = True) -> None:
        """The rule is about to evaluate global ``step``: its reads of that step are charted
        (``Rule.invoke`` calls this; reads of other steps are counted, not charted; with
        ``charted=False`` none is: the framework's fetch of the required tensors). Reads left
        from a step whose evaluation raised are charted at that step first."""
        if self._names:
            self.chart_reads(self._now if isinstance(self._now, int) else None)
        self._now = step if charted else _NOT_CHARTED

    def chart_reads(self, step: int | None = None, fired: bool = False) -> None:
        """Offer the reads noted since the last call at global ``step`` (evaluated; the rule
        ``fired`` there or not; None: each step read) to the read charts
        (``evaluator.rules.read_charts``). Never raises."""
        names, values, at = self._names, self._values, self._read_at
        self._now = None
        if names:
            self._names, self._values, self._read_at, self._held = [], [], [], 0
            self._reads += len(names)
            with self._lock:
                charts = self._read_charts
                try:
                    if not at and step is not None:  # the reads of a step's evaluation
                        charts.offer(step, self._mode_name(step), names, values, fired)
                    else:
                        charts.offer_pending(names, values, at, step, fired, self._mode_name)
                except Exception:  # a chart is a help; never fail a rule over it
                    _log.debug("reads at step %s not charted", step, exc_info=True)

    def _tensors_read(self) -> int:
        """How many tensors were read (at most about 10,000 are told apart)."""
        return len(self._read_tensors | self._read_charts.names() | set(self._names))

    def _mode_name(self, step: int) -> str | None:
        mode = self._mode_of(step)[0]
        return None if mode is None or mode is ModeKeys.GLOBAL else mode.name

    def note_read(self, name: str, step: int, value: Any = None) -> None:
        """A tensor was read, and ``value`` is what was read (``evaluator.engine.reads`` calls
        this, in the rule's thread): counted. ``watch_reads`` puts ``_note_watched`` in its
        place."""
        self._reads += 1
        if len(self._read_tensors) < 10_000:
            self._read_tensors.add(name)

    def _note_watched(self, name: str, step: int, value: Any = None) -> None:
        """``note_read`` of a rule that watches its reads: a read of the step evaluated keeps
        a reference to what was read until the step ends (at most ``MAX_READS_CHARTED`` reads
        and ``HELD_BYTES``; ``chart_reads`` counts its tensor)."""
        names = self._names
        if step == self._now and len(names) < MAX_READS_CHARTED:  # the common case, lean
            if type(value) is _ndarray:  # (getattr(value, "nbytes", 0) costs a read 0.1 us)
                held = self._held = self._held + value.nbytes
                if held > HELD_BYTES:
                    value = None  # counted, not charted
            names.append(name)
            self._values.append(value)
            return  # counted when charted (chart_reads)
        if self._now is None and len(names) < MAX_READS_CHARTED:  # outside a step's evaluation
            self._held += value.nbytes if type(value) is _ndarray else 0
            self._read_at.append(step)
            names.append(name)
            self._values.append(value if self._held <= HELD_BYTES else None)
            return
        self._reads += 1  # a read of another step, or past MAX_READS_CHARTED: not charted
        if len(self._read_tensors) < 10_000:
            self._read_tensors.add(name)
