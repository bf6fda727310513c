"""What a rule checked and why it fired: the evidence behind every verdict.

A rule records each comparison it makes with ``Evidence.compare``: the global step, the
tensor(s), the measured quantity and its value, and the parameter and threshold it was compared
with. From those records the evaluator can say, for any verdict,

* why it fired: every firing comparison, with the mode, mode step, worker and one sentence
  (the same sentence the rule logs);
* what a quiet run checked: how many tensors, steps and comparisons, and the comparison that
  came closest to its threshold;
* that a rule checked nothing, which must never read as ``NoIssuesFound``.

Rules that do not record comparisons (a user's rule written for smdebug) are still counted:
``Rule.invoke`` observes every tensor value the rule reads (``evaluator.engine.reads``), so a
rule that read no tensor at any step is known to have checked nothing.

Built-in rules call ``compare`` for every comparison they make::

    if self.evidence.compare(step, name, quantity="dead units (%)", value=dead,
                             parameter="threshold_layer", threshold=self.threshold_layer,
                             fires_when=">",
                             sentence=lambda: f"{dead:.1f}% of {name}'s units are dead"):
        fired = True

**Series.** Every ``compare`` also adds the value to the series of its tensor(s), quantity,
parameter and comparison, the history the rule report (``evaluator.report``) charts. A rule
charts a quantity it watches without a threshold (the curve behind its verdict: the loss per
mode, a tensor's norm) with ``record``::

    self.evidence.record(step, name, quantity="loss", value=loss, mode=ModeKeys.EVAL)

A rule that records no comparisons (one written for smdebug) has what it reads charted
(``watch_reads``; ``Rule.invoke`` calls ``chart_reads`` after each step): steps are sampled,
a sampled step's reads are held by reference while it is evaluated and its figures computed
when it ends (``evaluator.rules.read_charts``), never by reading a value again.

A series is bounded whatever the run's length: it keeps the lowest and the highest value of
each of at most ``SERIES_BUCKETS`` runs of consecutive steps (so a spike survives), and its
firing points and closest approach exactly. A rule keeps at most ``MAX_SERIES`` series.
``Evidence.series()`` returns them (the status reporter hands each rule's ``Evidence`` to the
report with its firing and end events).
"""

from __future__ import annotations

import logging
import math
import operator
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.checks import Check, SelectionHint, default_sentence
from evaluator.rules.diagnosis import Diagnosis
from evaluator.rules.read_watch import ReadWatch
from evaluator.rules.series import MAX_MARKS, SERIES_BUCKETS, Series, json_number
from evaluator.rules.series_set import MAX_SERIES, SeriesSet
from evaluator.rules.shown_steps import check_shown, series_shown, writer_steps

__all__ = [
    "MAX_MARKS",
    "MAX_SERIES",
    "SERIES_BUCKETS",
    "Check",
    "Evidence",
    "SelectionHint",
    "Series",
    "json_number",
]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
MAX_FIRINGS = 100  # firing comparisons kept per rule (the count goes on)


class Evidence(ReadWatch):
    """The comparisons and reads of one rule. Thread-safe: the evaluator reads it while the
    rule's thread writes it."""

    def __init__(self, rule_name: str, trial: Any, *, logger: logging.Logger | None = None) -> None:
        self.rule_name = rule_name
        self.trial = trial
        self.logger = logger or logging.getLogger(f"evaluator.rules.{rule_name}")
        self._lock = threading.Lock()
        self._tensors: set[str] = set()
        self._steps: set[int] = set()
        self._comparisons = 0
        self._closest: dict[tuple[str, str], Check] = {}
        self._closest_margin: dict[tuple[str, str], float] = {}
        self._firings: list[Check] = []
        self._firing_count = 0
        self._notes: list[Check] = []  # firings the rule keeps as notes (ignore_converged)
        self._note_count = 0
        self._mode_cache: tuple[int, ModeKeys | None, int | None] | None = None
        self._shown = writer_steps(trial)  # None: the global steps are the writer's
        self._series = SeriesSet()
        self._labels = self._series.labels  # looked up for every comparison
        self._init_reads()

    # ---- recording (the rule's thread) ----------------------------------------------------

    def compare(
        self,
        step: int,
        tensors: str | Iterable[str],
        *,
        quantity: str,
        value: float,
        parameter: str,
        threshold: float,
        fires_when: str,
        sentence: str | Callable[[], str] | None = None,
        mode: ModeKeys | None = None,
        mode_step: int | None = None,
        diagnose: Callable[[], Diagnosis] | None = None,
    ) -> bool:
        """Record that ``quantity`` of ``tensors`` at global ``step`` was ``value`` and was
        compared with ``parameter`` = ``threshold``; the condition is ``value fires_when
        threshold``. Returns whether it is met; when it is, ``sentence`` (or one made from the
        fields) is logged and kept: give a callable (``lambda: f"..."``) so that the text is
        formatted only for a firing. ``mode``/``mode_step`` default to the step's own. The
        value also joins its series (what the rule report charts).

        ``diagnose`` (called for a firing only) gives the rule's reading of the firing
        (``evaluator.rules.diagnosis``): it is kept with the reason and its words end the
        sentence. A diagnosis marked ``note`` makes the firing a note: logged and kept under
        ``notes``, not counted as a firing, and ``compare`` returns False.

        Called for every tensor at every step, so it is kept cheap: counters and sets are
        written without the lock (only the rule's thread writes them; readers take their
        sizes), and a ``Check`` is built only for a firing or a new closest approach."""
        op = _OPS.get(fires_when)
        if op is None:
            raise ValueError(f"fires_when must be one of {', '.join(_OPS)}, got {fires_when!r}")
        if isinstance(tensors, str):
            names: tuple[str, ...] = (tensors,)
            self._tensors.add(tensors)
        else:
            names = tuple(tensors)
            self._tensors.update(names)
        value, threshold = float(value), float(threshold)
        fired = op(value, threshold)
        diagnosis = diagnose() if fired and diagnose is not None else None
        noted = diagnosis is not None and diagnosis.note
        fired = fired and not noted
        self._comparisons += 1
        self._steps.add(step)
        # How far from meeting the condition (<= 0 when met; NaN when it cannot be said).
        margin = threshold - value if fires_when[0] == ">" else value - threshold
        # The series (what _add_point does, inlined: this runs for every comparison).
        label = self._labels.get(quantity)
        if label is None:
            label = self._series.label(quantity)
        series_key = (names, label, parameter, fires_when)
        # Only this thread adds series: it may look one up without the lock. (acquire and
        # release cost half of a with block.)
        series = self._series.by_key.get(series_key)
        self._lock.acquire()
        try:
            if series is None:
                series = self._series.new(series_key, threshold)
            if series is not None:
                series.add(step, value, threshold, fired, margin)
        finally:
            self._lock.release()
        key = (parameter, fires_when)
        if not fired and not noted and not margin < self._closest_margin.get(key, math.inf):
            return False  # neither a firing nor nearer than before (or NaN): nothing to keep
        if mode is None:
            mode, mode_step = self._mode_of(step)
        check = Check(
            step,
            names,
            quantity,
            value,
            parameter,
            threshold,
            fires_when,
            mode.name if mode is not None else None,
            mode_step,
            diagnosis=diagnosis,
        )
        if fired or noted:
            check = self._fire(check, sentence, note=noted)
        with self._lock:
            if margin < self._closest_margin.get(key, math.inf):
                self._closest_margin[key] = margin
                self._closest[key] = check
        return fired

    def record(
        self,
        step: int,
        tensors: str | Iterable[str],
        *,
        quantity: str,
        value: float,
        mode: ModeKeys | str | None = None,
    ) -> None:
        """Add ``value`` of ``quantity`` at global ``step`` to the series the rule report
        charts, for a quantity the rule watches but does not compare with a threshold (what
        it compares, ``compare`` records itself): the curve behind a verdict, such as the
        training and validation loss. ``mode`` (TRAIN, EVAL...) keeps one series per mode.
        Optional; it counts as no check."""
        names = (tensors,) if isinstance(tensors, str) else tuple(tensors)
        mode_name = mode.name if isinstance(mode, ModeKeys) else mode
        if mode_name == "GLOBAL":
            mode_name = None
        self._add_point(
            names, quantity, None, None, step, float(value), None, False, math.nan, mode_name
        )

    def _add_point(
        self,
        names: tuple[str, ...],
        quantity: str,
        parameter: str | None,
        fires_when: str | None,
        step: int,
        value: float,
        threshold: float | None,
        fired: bool,
        margin: float,
        mode: str | None = None,
    ) -> None:
        key: tuple[Any, ...] = (names, self._series.label(quantity), parameter, fires_when)
        if mode is not None:
            key = (*key, mode)
        with self._lock:
            series = self._series.by_key.get(key)
            if series is None:
                series = self._series.new(key, threshold)
            if series is not None:
                series.add(step, value, threshold, fired, margin)

    def checked(self, step: int, tensors: str | Iterable[str]) -> None:
        """Record that ``tensors`` were checked at ``step`` by a test with no threshold."""
        self._comparisons += 1
        self._tensors.update((tensors,) if isinstance(tensors, str) else tensors)
        self._steps.add(step)

    def _fire(
        self, check: Check, sentence: str | Callable[[], str] | None, *, note: bool = False
    ) -> Check:
        text = (sentence() if callable(sentence) else sentence) or default_sentence(
            self.rule_name, check, at=self._shown(check.step) if self._shown else None
        )
        if check.diagnosis is not None:
            text = f"{text}: {check.diagnosis.words}"
        done = replace(check, worker=self._worker(check), sentence=text)
        self.logger.info("%s%s", "note: " if note else "", text)
        with self._lock:
            if note:
                self._note_count += 1
                if len(self._notes) < MAX_FIRINGS:
                    self._notes.append(done)
                return done
            self._firing_count += 1
            if len(self._firings) < MAX_FIRINGS:
                self._firings.append(done)
        return done

    def _mode_of(self, step: int) -> tuple[ModeKeys | None, int | None]:
        """The step's mode and mode step; the last step's answer is kept (a rule compares
        many tensors at one step)."""
        cached = self._mode_cache
        if cached is not None and cached[0] == step:
            return cached[1], cached[2]
        try:
            mode, mode_step = self.trial.mode_modestep(step)
        except Exception:  # a stand-in trial without modes
            mode, mode_step = None, None
        self._mode_cache = (step, mode, mode_step)
        return mode, mode_step

    def _worker(self, check: Check) -> str | None:
        """The worker whose value was read (``Tensor.value`` reads the first one). A trial of
        one worker answers at once; otherwise the tensor's per-step view is built."""
        if len(check.tensors) != 1:
            return None
        try:
            workers = self.trial.workers()
            if len(workers) > 1:
                workers = self.trial.tensor(check.tensors[0]).workers(check.step)
        except Exception:  # the worker is a detail; never fail a firing over it
            return None
        return workers[0] if workers else None

    # ---- reading (the evaluator) ----------------------------------------------------------

    @property
    def comparisons(self) -> int:
        return self._comparisons

    @property
    def reads(self) -> int:
        return self._reads + len(self._names) + len(self._loose[0])  # (noted: counted later)

    def checked_anything(self, *, reads_count: bool = True) -> bool:
        """Whether the rule compared anything or, when ``reads_count`` (a rule that does not
        record its comparisons), read any tensor value."""
        return self._comparisons > 0 or (reads_count and self.reads > 0)

    def counts(self) -> dict[str, int]:
        """The progress line's counters."""
        with self._lock:
            return {
                "tensors_checked": len(self._tensors),
                "comparisons": self._comparisons,
                "tensor_values_read": self.reads,
            }

    def firings_at(self, step: int) -> list[Check]:
        with self._lock:
            return [c for c in self._firings if c.step == step]

    def shown(self, checks: Iterable[Check]) -> list[dict[str, Any]]:
        """``checks`` as the outputs show them: at the writer's steps (``shown_steps``)."""
        return [check_shown(c.to_dict(), self._shown) for c in checks]

    @property
    def note_count(self) -> int:
        """How many firings the rule kept as notes (``Diagnosis.note``)."""
        return self._note_count

    def notes_after(self, count: int) -> list[Check]:
        """The notes kept after the first ``count`` (the first ``MAX_FIRINGS`` are kept)."""
        with self._lock:
            return self._notes[count:]

    def series(self, *, limit: int | None = None) -> dict[str, Any]:
        """Every series as JSON-ready dicts (``Series.to_dict``), each cut to about ``limit``
        points besides its marks, and how many comparisons fell outside ``MAX_SERIES``."""
        with self._lock:
            found = self._series.to_dict(limit)
            if len(self._read_charts):
                room = max(0, MAX_SERIES - len(found["series"]))
                charts, left_out = self._read_charts.series(limit, room)
                found["series"].extend(charts)
                found["points_left_out"] += left_out
        found["series"] = series_shown(found["series"], self._shown)
        return found

    def summary(self) -> dict[str, Any]:
        """The result file's ``evidence`` object (see ``evaluator.status.files``); ``series``
        counts the series the report charts (kept in its data file, not here)."""
        with self._lock:
            closest = sorted(self._closest.values(), key=lambda c: (c.parameter, c.fires_when))
            return {
                "tensors_checked": len(self._tensors),
                "steps_checked": len(self._steps),
                "comparisons": self._comparisons,
                "tensor_values_read": self.reads,
                "tensors_read": self._tensors_read(),
                "firings": self._firing_count,
                "reasons": self.shown(self._firings),
                "closest": self.shown(closest),
                "series": len(self._series) + len(self._read_charts),
                **(
                    {"note_count": self._note_count, "notes": self.shown(self._notes)}
                    if self._note_count
                    else {}
                ),
            }
