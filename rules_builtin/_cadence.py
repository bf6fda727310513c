"""Reading a parameter that counts steps against the values actually logged.

A loss saved at every step by smdebug's hook and a loss that Hugging Face's Trainer logs every
10 to 500 steps (the mean since the previous log, rounded to 4 decimals) answer the same
question with very different numbers of values: a window of ``num_steps=10`` holds ten
values of the first and one of the second. A comparison of single noisy values fires on the
first uptick of a healthy run. So the loss-progress rules measure the noise of each series
they follow and let a window that holds too few logged values to tell a trend from that noise
grow to the fewest that can:

* ``noise``: the scatter of the values around a smooth trend (the line through each value's
  two neighbours), as a standard deviation (from the median absolute second difference, so
  a few outliers do not inflate it), measured over the last ``NOISE_MEMORY`` values, and
  taken in % of the series' ``scale``: the magnitude the loss started at. A loss that fell
  from 2 to 0.01 is judged against what it fell from, so a window need not resolve 1 % of a
  level near 0 (a run at its floor is converged, not undecided). A straight trend does not
  inflate the noise; a noise-free log has 0.
* ``values_needed``: how many values a window's mean must hold so that the difference of two
  such means (or of one mean and a fixed value) has a standard error of at most the margin
  the comparison must resolve (the rule's own, at least ``RESOLUTION_PERCENT`` % of the
  scale): ``ceil(k * (noise / resolution) ** 2)`` with ``k = 2`` for two means and 1 for
  one, never fewer than ``MIN_NOISY_VALUES`` when the series is noisy (the noise of fewer
  values cannot even be measured), and 1 when it is smooth (AWS's single-value comparison,
  exact there).

``Cadence`` follows one series: its last values and steps, its noise, its logging interval and
the window (in the rule's steps) that holds a given number of logged values. A series logged
at every step keeps the rule's documented windows (``rules_builtin._levels.LossView.resize``):
they already hold the values the parameter counts, as AWS meant them.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from itertools import islice

import numpy as np

__all__ = [
    "MIN_NOISY_VALUES",
    "NOISE_MEMORY",
    "RESOLUTION_PERCENT",
    "Cadence",
    "noise",
    "values_needed",
]

NOISE_MEMORY = 64  # the noise is measured over this many latest values
MIN_NOISY_VALUES = 5  # a window of a noisy series holds at least this many values
MOST_VALUES = 100_000  # the most values a window asks for (a loss at 0 that still moves)
# The smallest change (in % of the scale) a noisy series' comparison must resolve: a rule's
# own margin when larger (``diff_percent``, ``delta``). A decrease of 0.1 % per window cannot
# be told from the noise of a mini-batch loss in any number of values a run logs.
RESOLUTION_PERCENT = 1.0
# The median |second difference| of white noise, per sigma (0.6745 sqrt(6)).
_MAD_TO_SIGMA = 0.6745 * math.sqrt(6.0)


def noise(values: Sequence[float]) -> float:
    """The standard deviation of the noise of ``values`` (in order): their scatter around the
    line through each value's two neighbours, from the median absolute second difference
    (which a straight trend does not move, and a few outliers do not inflate) taken about
    their median once there are three (so a curve that bends one way, a fast fall sampled
    sparsely, is not taken for noise); 0.0 with fewer than three finite values."""
    y = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if len(y) < 3:
        return 0.0
    seconds = y[2:] - 2 * y[1:-1] + y[:-2]
    if len(seconds) >= 3:  # a curve that bends one way (a sparse, fast fall) is no noise
        seconds = seconds - np.median(seconds)
    return float(np.median(np.abs(seconds))) / _MAD_TO_SIGMA


def values_needed(noise_percent: float, margin_percent: float, *, means: int = 2) -> int:
    """The fewest values per window for which a comparison of ``means`` window means (2) or
    of one mean with a fixed value (1) has a standard error of at most
    ``max(margin_percent, RESOLUTION_PERCENT)`` % of the scale: 1 when the series is smooth
    (the noise of a difference of two single values, ``sqrt(2) * noise_percent``, is at most
    half of ``margin_percent``, as ``rules_builtin._levels.smooth`` decides), else at least
    ``MIN_NOISY_VALUES``."""
    if math.sqrt(2.0) * noise_percent <= max(margin_percent, 0.1) / 2:
        return 1
    resolution = max(margin_percent, RESOLUTION_PERCENT)
    if not math.isfinite(noise_percent):
        return MOST_VALUES
    needed = math.ceil(means * (noise_percent / resolution) ** 2)
    return min(MOST_VALUES, max(MIN_NOISY_VALUES, needed))


class Cadence:
    """One logged series as a rule follows it: its latest values (at most ``NOISE_MEMORY``)
    and their steps (the rule's own step count: mode steps, passes, values)."""

    def __init__(self) -> None:
        self.values: deque[float] = deque(maxlen=NOISE_MEMORY)
        self.steps: deque[int] = deque(maxlen=NOISE_MEMORY)
        self.count = 0  # values seen in all
        self._noise: float | None = None
        self._interval: float | None = None
        self._first: list[float] = []  # the first finite magnitudes, for ``scale``
        self._scale: float | None = None

    def add(self, step: int, value: float) -> None:
        if len(self._first) < MIN_NOISY_VALUES and math.isfinite(value):
            self._first.append(abs(value))
        self.values.append(value)
        self.steps.append(step)
        self.count += 1
        self._noise = self._interval = None

    def noise_percent(self) -> float:
        """The noise of the latest values in % of the series' scale (``scale``)."""
        if self._noise is None:
            self._noise = 100.0 * noise(self.values) / self.scale()
        return self._noise

    def scale(self) -> float:
        """The magnitude the loss started at (the largest of its first three finite values,
        known once ``MIN_NOISY_VALUES`` are read; until then, or when that is 0, the largest
        seen).
        A loss that fell a hundredfold is judged against what it fell from: a window need
        not resolve 1 % of a level near 0."""
        if self._scale is None:
            if len(self._first) >= MIN_NOISY_VALUES:
                found = max(self._first[:3])  # the start (a fast fall's first values)
                if found > 0:
                    self._scale = found
                    return found
            finite = [abs(v) for v in self.values if math.isfinite(v)] + self._first
            return max(finite, default=0.0) or 1.0
        return self._scale

    def needed(self, margin_percent: float, *, means: int = 2) -> int:
        """Values per window for a comparison at ``margin_percent`` (``values_needed``)."""
        return values_needed(self.noise_percent(), margin_percent, means=means)

    def interval(self) -> float:
        """The median interval between logged values, in the rule's steps (1 until two)."""
        if self._interval is None:  # (at most NOISE_MEMORY steps: in Python, once)
            steps = self.steps
            if len(steps) < 2:
                return 1.0
            gaps = [b - a for a, b in zip(steps, islice(steps, 1, None))]
            self._interval = max(1.0, float(statistics.median(gaps)))
        return self._interval

    def span(self, values: int) -> int:
        """The steps ``values`` logged values take at this series' interval."""
        return math.ceil(values * self.interval())
