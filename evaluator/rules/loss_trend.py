"""The figures of one loss series, in step order: ``measure`` gives its ``Trend`` (start, level,
lowest, fall, noise, recent change, ...), what ``evaluator.rules.diagnosis`` classifies. Each
figure and threshold is described there ("The figures that decide")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CONVERGED_FALL",
    "EARLY_FRACTION",
    "MIN_FALL",
    "MIN_RECENT",
    "MIN_TREND",
    "NOISE_K",
    "OVERFIT_RISE",
    "RECENT_FRACTION",
    "RISE",
    "START_VALUES",
    "SWING",
    "Trend",
    "measure",
]

START_VALUES = 3  # the start is the median of this many first values
MIN_FALL = 0.02  # fraction of the starting loss: a smaller fall is no learning, noise or not
CONVERGED_FALL = 0.5  # a loss that fell by this fraction of its start learned, however it fell
EARLY_FRACTION = 0.2  # ... one that fell less, all in the first 20 % of its steps, stalled
OVERFIT_RISE = 0.05  # fraction of its lowest a validation loss must rise by to be overfitting
RISE = 0.1  # fraction of the starting loss: a rise (or trend) smaller than this is flat
SWING = 0.15  # fraction of the starting loss: noise above this is an oscillation
NOISE_K = 2.0  # a rise or trend must also exceed this many times the noise
MIN_RECENT = 3  # the recent part: at least this many values ...
MIN_TREND = 5  # a recent trend counts as a rise only through at least this many values
RECENT_FRACTION = 0.25  # ... and at least this fraction of the series


@dataclass(frozen=True)
class Trend:
    """The figures of one loss series (see the module docstring); values are in loss units,
    ``scale`` is ``|start|`` (or the largest magnitude when ``start`` is 0)."""

    count: int
    start: float
    level: float
    lowest: float
    scale: float
    change: float  # fitted change over the recent part
    noise: float
    recent_steps: int
    flat_steps: int
    finite: bool = True  # no NaN or infinity in the recent part
    first_bad_step: int | None = None
    recent: int = MIN_RECENT  # how many values the recent part holds
    start_count: int = 1  # how many first values the start is the median of
    first: float = math.nan  # the very first (finite) value
    early_low: float = math.nan  # the lowest running median in the first EARLY_FRACTION
    width: int = 1  # the running medians' width

    def swings(self) -> bool:
        """Noise above ``SWING`` of its start, or of its level when it never fell below its
        first value (a loss that blew up after its first step swings about its level)."""
        scale = self.scale if self.level < self.first else min(self.scale, abs(self.level))
        return self.noise > SWING * scale

    def stalled(self) -> bool:
        """Fell less than ``CONVERGED_FALL`` of its start, all of it in the first
        ``EARLY_FRACTION`` of its steps, and no further since beyond the noise: a net stuck
        (at chance, say) after its first updates, not a run that learned and flattened."""
        if self.fall >= CONVERGED_FALL or math.isnan(self.early_low):
            return False
        se = 1.25 * self.noise * math.sqrt(1 / self.recent + 1 / self.width)
        return self.early_low - self.level <= NOISE_K * se

    def part(self, value: float) -> float:
        """``value`` as a fraction of the starting loss."""
        return value / self.scale if self.scale > 0 else 0.0

    @property
    def fall(self) -> float:
        return self.part(self.start - self.level)

    @property
    def rise(self) -> float:
        return self.part(self.level - self.lowest)

    def fell(self) -> bool:
        """Fell beyond its noise: ``start - level`` above ``NOISE_K`` standard errors of the
        difference of the two medians (1.25 sigma / sqrt(count) each) and ``MIN_FALL``."""
        se = 1.25 * self.noise * math.sqrt(1 / self.recent + 1 / self.start_count)
        return self.start - self.level > max(NOISE_K * se, MIN_FALL * self.scale)

    def rose_from_lowest(self) -> bool:
        """Its level rose from its lowest beyond the noise and by more than ``OVERFIT_RISE``
        of that lowest (a validation loss that turned up)."""
        bar = max(NOISE_K * self.noise, OVERFIT_RISE * abs(self.lowest))
        return self.level - self.lowest > bar

    def rising(self) -> bool:
        """Above its lowest, or trending up, by more than ``RISE`` and the noise."""
        bar = max(RISE * self.scale, NOISE_K * self.noise)
        trend = self.recent >= MIN_TREND and self.change > bar  # a line through 3 values wobbles
        return self.level - self.lowest > bar or trend

    def figures(self, prefix: str = "") -> dict[str, float | int]:
        return {
            f"{prefix}start": _round(self.start),
            f"{prefix}level": _round(self.level),
            f"{prefix}lowest": _round(self.lowest),
            f"{prefix}fall_percent": _round(100 * self.fall),
            f"{prefix}recent_change_percent": _round(100 * self.part(self.change)),
            f"{prefix}recent_steps": self.recent_steps,
            f"{prefix}noise_percent": _round(100 * self.part(self.noise)),
            f"{prefix}rise_percent": _round(100 * self.rise),
            f"{prefix}flat_steps": self.flat_steps,
            f"{prefix}values": self.count,
        }


def _round(x: float) -> float:
    return float(f"{x:.4g}") if math.isfinite(x) else x


def _medians(values: np.ndarray, width: int) -> np.ndarray:
    """Running medians of ``width`` consecutive values (the values themselves for 1)."""
    if width <= 1 or len(values) < width:
        return values
    found: np.ndarray = np.median(np.lib.stride_tricks.sliding_window_view(values, width), axis=1)
    return found


def measure(steps: Sequence[int], values: Sequence[float]) -> Trend | None:
    """The figures of a series of (step, value) in step order; None when it is empty."""
    with np.errstate(all="ignore"):  # a diverging loss: 1e38 squared overflows, harmlessly
        return _measure(steps, values)


def _measure(steps: Sequence[int], values: Sequence[float]) -> Trend | None:
    x = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if len(y) == 0:
        return None
    bad = ~np.isfinite(y)
    if bad[-_recent_count(len(y)) :].any():
        good = y[~bad]
        start = float(good[0]) if len(good) else math.nan
        return Trend(len(y), start, math.nan, start, abs(start) or 1.0, math.nan, math.nan,
                     0, 0, finite=False, first_bad_step=int(x[np.argmax(bad)]))  # fmt: skip
    earlier_bad = int(x[np.argmax(bad)]) if bad.any() else None  # finite again since
    x, y = x[~bad], y[~bad]
    n = len(y)
    recent_n = _recent_count(n)
    width = 1 if n < 6 else (3 if n < 20 else 5)  # running medians: one noisy value never decides
    start_count = min(START_VALUES, n)
    start = float(np.median(y[:start_count]))  # before training changed much
    rx, ry = x[-recent_n:], y[-recent_n:]
    level = float(np.median(ry))
    earlier = _medians(y[: n - recent_n], width)
    lowest = min(level, float(earlier.min())) if len(earlier) else level
    scale = abs(start) or float(np.abs(y).max()) or 1.0
    span = float(rx[-1] - rx[0])
    spread = 0.0
    if recent_n >= 3 and span > 0:
        slope, intercept = np.polyfit(rx, ry, 1)
        change = float(slope * span)
        spread = 1.4826 * float(np.median(np.abs(ry - (slope * rx + intercept))))
    else:
        change = float(ry[-1] - ry[0])
    # Noise: the spread of step-to-step differences over the later half (a trend shifts
    # them all alike and is taken out with their median).
    d = np.diff(y[-max(MIN_RECENT + 1, n // 2) :])
    noise = (
        1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2) if len(d) >= 3 else 0.0
    )
    noise = max(noise, spread)  # slow swings show around the recent line
    band = max(NOISE_K * noise, RISE * scale)
    smooth = _medians(y, width)
    smooth_steps = x[len(x) - len(smooth) :]
    outside = np.nonzero(np.abs(smooth - level) > band)[0]
    if not len(outside):
        since = x[0]  # within the band all along
    elif outside[-1] + 1 < len(smooth):
        since = smooth_steps[outside[-1] + 1]
    else:
        since = x[-1]  # outside it now
    early = smooth[smooth_steps <= x[0] + EARLY_FRACTION * (x[-1] - x[0])]
    early_low = float(early.min()) if len(early) and n >= 2 * MIN_TREND else math.nan
    return Trend(n, start, level, lowest, scale, change, noise, int(span), int(x[-1] - since),
                 first_bad_step=earlier_bad, recent=recent_n, start_count=start_count,
                 early_low=early_low, first=float(y[0]),
                 width=width)  # fmt: skip


def _recent_count(n: int) -> int:
    return min(n, max(MIN_RECENT, math.ceil(n * RECENT_FRACTION)))
