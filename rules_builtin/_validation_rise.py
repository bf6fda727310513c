"""Whether a validation loss has risen from its lowest beyond its noise (Overfit).

A validation pass's mean is already a mean over many batches, yet the passes of a real run
still scatter: a Whisper fine-tune's evaluations move 3 to 8 % from one pass to the next while
their trend falls. One pass that does not beat the best by a fixed 1 % is not overfitting, and
neither is one pass above the lowest of many noisy passes (that lowest sits below the level by
chance). So the rise is measured on *levels*: means of ``k`` consecutive judged passes, ``k``
the fewest (from 2, or 1 on a smooth series, AWS's single pass, up to ``MOST_PASSES``) whose
rise clears its bar. The latest level has risen when it is above the lowest earlier level by
more than ``RISE_Z`` standard errors of their difference (the noise of the passes, measured
around the line through each pass's neighbours: ``rules_builtin._cadence.noise``) and by more
than ``OVERFIT_RISE`` of that lowest level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import CONVERGED, NOT_LEARNING, OVERFIT_RISE, OVERFITTING, Diagnosis
from evaluator.rules.kit.selection import percent_of
from rules_builtin._cadence import NOISE_MEMORY, noise

__all__ = ["MOST_PASSES", "Rise", "ValidationRise", "record_not_risen", "risen_diagnosis"]

MOST_PASSES = 5  # the most validation passes a level averages
SMOOTH_RISE = 0.01  # a smooth pass this far above the best rose (beyond rounding)
# Standard errors a rise of one level above another must exceed (one-sided, about 93 %).
# Measured on the 51 wild-hf-dev runs: 2.0 catches 4 of the 7 overfit runs, 1.75 5, 1.5 all
# 7, each with no healthy run firing.
RISE_Z = 1.5


@dataclass(frozen=True)
class Rise:
    latest: float  # the latest level (mean of ``passes`` passes)
    low: float  # the lowest earlier level
    bar: float  # how far above ``low`` a level must be to have risen
    passes: int  # passes per level

    @property
    def risen(self) -> bool:
        return self.latest - self.low > self.bar

    @property
    def rise_percent(self) -> float:
        return percent_of(self.latest - self.low, self.low)

    @property
    def bar_percent(self) -> float:
        return percent_of(self.bar, self.low)


@dataclass
class ValidationRise:
    """The judged validation means of one loss, in order."""

    history: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.history.append(value)

    def smooth(self) -> bool:
        """Whether the passes are smooth enough for a single one to decide at 1 % (AWS's
        reading, with a pass that is not 1 % below the best counting): ``RISE_Z`` standard
        errors of a difference of two passes within 1 % of the lowest."""
        passes = [v for v in self.history if not math.isnan(v)]
        if not passes:
            return True
        sigma = noise(passes[-NOISE_MEMORY:])
        return RISE_Z * sigma * math.sqrt(2) <= 0.01 * min(abs(v) for v in passes)

    def fall_margin(self) -> float:
        """The fall below the best pass (a fraction of it) that the noise of smooth passes
        cannot make: ``RISE_Z`` standard errors of a difference of two passes."""
        passes = [v for v in self.history if not math.isnan(v)]
        low = min((abs(v) for v in passes), default=0.0)
        return RISE_Z * noise(passes[-NOISE_MEMORY:]) * math.sqrt(2) / low if low else 0.0

    def rose_once(self, best: float, value: float) -> bool:
        """Whether one smooth pass rose above the best by more than its noise and by
        ``SMOOTH_RISE`` of the best (a smooth series: any rise beyond its noise is real)."""
        return value - best > abs(best) * max(self.fall_margin(), SMOOTH_RISE)

    def risen(self) -> bool:
        found = self.measure()
        return found is not None and found.risen

    def measure(self) -> Rise | None:
        """The latest level against the lowest earlier one, for the fewest passes per level
        (from 2 up to ``MOST_PASSES``) whose rise clears its bar; else for the most passes
        the history allows. None until there are two levels that do not overlap."""
        passes = [v for v in self.history if not math.isnan(v)]
        if len(passes) < 4:
            return None
        sigma = noise(passes[-NOISE_MEMORY:])
        found = None
        for k in range(2, min(MOST_PASSES, len(passes) // 2) + 1):
            levels = [math.fsum(passes[i : i + k]) / k for i in range(len(passes) - k + 1)]
            latest, low = levels[-1], min(levels[: len(levels) - k])
            bar = max(RISE_Z * sigma * math.sqrt(2 / k), OVERFIT_RISE * abs(low))
            found = Rise(latest, low, bar, k)
            if found.risen:
                break
        return found


def risen_diagnosis(
    found: Diagnosis, val: tuple[float, float], train: tuple[float, float]
) -> Diagnosis:
    """The diagnosis of a firing whose validation loss rose from its best pass (``val``: best,
    now) beyond its noise: ``overfitting`` while the training mean (``train``: at the best
    pass, now) did not rise too, whatever the whole-curve reading ``found`` says with the few
    passes it has; ``found`` is kept when it is neither ``converged`` nor ``not_learning``
    (diverging, oscillating) or when training rose with it."""
    (best, now), (then, latest) = val, train
    if found.kind not in (CONVERGED, NOT_LEARNING) or latest > then:
        return found  # diverging, oscillating: the whole curve says more than one rise
    words = (
        f"the validation loss rose {percent_of(now - best, best):.3g} % above its best pass "
        f"({best:.4g} to {now:.4g}) while the training loss went from {then:.4g} to "
        f"{latest:.4g}: the model is overfitting; keep the weights of the best validation "
        "step, stop earlier or regularise"
    )
    return Diagnosis(OVERFITTING, words, found.figures)


def record_not_risen(
    evidence: Any,
    rise: ValidationRise,
    name: str,
    ratio: float,
    where: tuple[int, ModeKeys, int | None],
) -> None:
    """Record a gap while the validation loss has not risen above its lowest level beyond its
    noise: that rise against its bar (global step, mode, mode step in ``where``), never a
    firing."""
    found = rise.measure()
    value, bar, k = -math.inf, math.inf, 1
    if found is not None:
        value, bar, k = found.rise_percent, found.bar_percent, found.passes
    step, mode, mode_step = where
    evidence.compare(
        step,
        name,
        quantity=f"rise (%) of the validation loss (mean of {k} pass(es)) above its lowest "
        f"earlier level, the (validation - training) / training ratio being {ratio:.3g}",
        value=value,
        parameter="validation risen beyond its noise",
        threshold=bar,
        fires_when=">",
        mode=mode,
        mode_step=mode_step,
    )
