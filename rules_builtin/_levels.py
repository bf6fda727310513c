"""How much of a loss's past a comparison needs: the noise of the series, measured on its values.

LossNotDecreasing and PoorWeightInitialization compare a loss now with the loss some steps
earlier. The AWS documentation compares single values: the loss at step s with the loss at
the newest step at least ``num_steps`` (``patience``) earlier. On a smooth series (a full-batch
run, a learning rate of 0, a loss stuck at one value) that is exact and is the earliest any
reading of the documentation can fire: a plateau is caught as soon as both values lie on it.
On a noisy series (one mini-batch's loss per step, Keras' running mean early in an epoch) one
earlier value can sit far from the level of the loss, and a healthy run would fire whenever a
lucky batch is the comparison value; there the rules compare with the mean of the earlier
window instead, at the price of that window's delay. ``single_decides`` lets LossNotDecreasing
keep the single-value comparison on a noisy series too when the window means show no fall
beyond one standard error of the noise (``fell_beyond_noise``), over the last window nor over
the last two: a noisy plateau fires as early as documented (bench/DETECTION.md: the numpy
lr_zero run at 12, not 24; pytorch_sigmoid_flat at 10, not 22), while a loss whose window means
keep falling by less than the noise per window (a mini-batch loss near its floor: Lightning's
``train_loss_step`` in tests/fixtures/tb_logs/lightning_real_overfit falls 4.7 % or more per
10 steps with noise 5-39 % of the level) shows its fall over two windows and is never
called flat on two single noisy values. A newest value above the anchor's by more than two
standard errors of their difference (``rose_beyond_noise``: a jump no batch noise explains,
which one window's mean has not caught up with) keeps the single values deciding.

``smooth`` decides between the two on the values the comparison reads (the earlier value and
the newer window): the noise is the robust standard deviation of their second differences
(a straight trend has none, so a falling loss is not taken for noise), and a series is smooth
when the noise of a difference of two single values, ``sqrt(2) * noise``, is below half the
smallest decrease that counts (``margin_percent`` % of the level). Measured on the project's
real-hook trials: mini-batch losses have a noise of 0.5-3 % of their level, Keras' running
means 0.2-1 %; full-batch and learning-rate-0 runs 0 (see bench/DETECTION.md).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from evaluator.rules.diagnosis import NOISE_K
from rules_builtin._cadence import MIN_NOISY_VALUES, Cadence, noise

__all__ = [
    "LossView",
    "fell_beyond_noise",
    "lowest",
    "noise",
    "noisy_levels",
    "rose_beyond_noise",
    "shortfalls",
    "single_decides",
    "smooth",
    "span",
]


def smooth(values: Sequence[float], margin_percent: float) -> tuple[bool, float]:
    """(whether single values may be compared, the noise in % of the level) for a series whose
    comparison reads ``values``: smooth when ``sqrt(2) * noise`` is at most half of
    ``margin_percent`` % of the level (the mean absolute value). Fewer than three finite
    values cannot show noise: smooth (sparse saves, one value per window, as AWS compares)."""
    finite = [v for v in values if math.isfinite(v)]
    level = sum(abs(v) for v in finite) / len(finite) if finite else 0.0
    sigma = noise(finite)
    percent = 100.0 * sigma / level if level > 0 else (0.0 if sigma == 0 else math.inf)
    return math.sqrt(2.0) * percent <= margin_percent / 2, percent


Level = tuple[float, int, int]  # a window's mean or median (or one value), first, last mode step
Window = list[tuple[int, int]]  # saved (mode step, global step) pairs


class Reader(Protocol):
    """The level of the values saved in a window (their mean, or median), None when none of
    them can be read: the rule's own reader, which records what it reads."""

    def __call__(self, window: Window, *, median: bool = False) -> Level | None: ...


def noisy_levels(
    read: Reader,
    view: LossView,
    at: tuple[tuple[int, int], Window, int],
    single: Level,
    margins: tuple[float, float],
    grown: bool,
) -> tuple[Level, Level, tuple[Level, Level]] | None:
    """(current, previous, the pair that decides) of LossNotDecreasing on a noisy series,
    ``at`` the anchor, the current window and the window's mode steps, ``single`` the anchor's
    value, ``margins`` the noise and the decrease that counts (%): the window medians on a
    grown window (one spike never decides); else the single values (the newest and the
    anchor's) when they and the window means show no fall (``single_decides``), or the window
    means. None when a value cannot be read."""
    anchor, window, steps = at
    current = read(window, median=grown)
    previous = read(view.window(anchor[0], steps), median=grown)
    last = read([window[-1]])
    if current is None or previous is None or last is None:
        return None
    if grown:
        return current, previous, (current, previous)
    jumped = rose_beyond_noise(last[0], single[0], *margins)
    fell = _windows_fell(read, view, at, (current[0], previous[0], jumped), margins)
    if single_decides(last, single, margins[1], windows_fell=fell):
        return current, previous, (last, single)
    return current, previous, (current, previous)


def _windows_fell(
    read: Reader,
    view: LossView,
    at: tuple[tuple[int, int], Window, int],
    means: tuple[float, float, bool],
    margins: tuple[float, float],
) -> bool:
    """Whether the current window's mean fell beyond the noise (``fell_beyond_noise``) below
    the mean of the window ending at the anchor, or, unless the newest value ``jumped`` above
    the anchor's beyond the noise (``rose_beyond_noise``: a rise the window has not caught up
    with), below the mean of the window before that one: a loss that keeps falling by less
    than its noise per window shows it over two windows, while a plateau shows no fall over
    either."""
    (anchor, window, steps), (current, previous, jumped) = at, means
    earlier = view.window(anchor[0], steps)
    if fell_beyond_noise(current, previous, *margins, (len(window), len(earlier))):
        return True
    if jumped:
        return False
    before = view.window(anchor[0] - steps, steps)
    back = read(before) if before else None
    if back is None:
        return False  # the first windows of the series: nothing earlier to compare
    return fell_beyond_noise(current, back[0], *margins, (len(window), len(before)))


def single_decides(
    last: tuple[float, int, int],
    single: tuple[float, int, int],
    diff_percent: float,
    *,
    windows_fell: bool,
) -> bool:
    """Whether, on a noisy series, the single values (the newest one and the anchor's, AWS's
    comparison) decide: they show no ``diff_percent`` % decrease and the window means show no
    fall beyond the noise (``windows_fell`` false, ``fell_beyond_noise`` over the last window
    and over the last two). A loss that keeps falling, by less than its noise per window,
    keeps the means deciding (no alarm on one unlucky batch); a plateau fires as early as the
    documented comparison."""
    fell = last[0] < single[0] - abs(single[0]) * diff_percent / 100
    if fell or math.isnan(last[0]) or math.isnan(single[0]):
        return False
    return not windows_fell


def rose_beyond_noise(last: float, single: float, noise: float, diff_percent: float) -> bool:
    """Whether the newest value ``last`` is above the anchor's value ``single`` by more than
    ``diff_percent`` plus ``NOISE_K`` standard errors of a difference of two single values
    (``sqrt(2) * noise``, the noise in % of the level): a jump no batch noise explains."""
    rise = 100.0 * (last - single) / abs(single) if single else 0.0
    return rise > diff_percent + NOISE_K * math.sqrt(2.0) * noise


def fell_beyond_noise(
    current: float, previous: float, noise: float, diff_percent: float, counts: tuple[int, int]
) -> bool:
    """Whether the window mean ``current`` is below the earlier window mean ``previous`` by
    more than ``diff_percent`` plus one standard error of their difference (``noise`` in % of
    the level, over the ``counts`` of values averaged); a NaN mean never fell."""
    se = noise * math.sqrt(sum(1 / max(c, 1) for c in counts))
    decrease = 100.0 * (previous - current) / abs(previous) if previous else 0.0
    return decrease > diff_percent + se


@dataclass
class LossView:
    """One loss tensor (LossNotDecreasing)'s saved steps in one mode, as (mode step, global step) pairs, with the
    values read so far; only the steps a comparison can still need are kept. ``best`` is the
    lowest window mean computed in this mode (never another mode's)."""

    saved: deque[tuple[int, int]] = field(default_factory=deque)
    values: dict[int, float | None] = field(default_factory=dict)  # global step -> value
    last_evaluated: int | None = None
    best: float | None = None
    cadence: Cadence = field(default_factory=Cadence)  # every value read, for the noise
    steps: int = 0  # the window in mode steps (``resize``); 0 until the first resize
    needed: int = 1  # the logged values a window must hold (``resize``)

    def resize(self, num_steps: int, margin_percent: float, noise_aware: bool) -> None:
        """Set ``steps``: ``num_steps``, grown when the series is logged less often than
        every mode step and is noisy, to the mode steps that hold the fewest logged values
        whose window means resolve ``margin_percent`` % of the loss's scale
        (``rules_builtin._cadence``). A series logged at every step keeps ``num_steps``:
        its window holds the values the parameter counts. While fewer than
        ``MIN_NOISY_VALUES`` values are read, the noise is unknown and counts as noise.
        Without ``noise_aware``, ``num_steps`` as AWS documents it."""
        if not noise_aware:
            self.steps, self.needed = num_steps, 1
            return
        c = self.cadence
        if c.count >= 2 and c.interval() <= 1:
            self.needed = 1  # logged at every step: the window holds the values it counts
        elif c.count < MIN_NOISY_VALUES:
            self.needed = MIN_NOISY_VALUES  # the noise cannot be measured yet
        else:
            self.needed = c.needed(margin_percent)
        self.steps = max(num_steps, c.span(self.needed))

    def add(self, mode_step: int, step: int, num_steps: int) -> None:
        if self.saved and mode_step <= self.saved[-1][0]:
            return
        self.saved.append((mode_step, step))
        anchor = self.anchor(num_steps)
        if anchor is None:
            return
        # Later anchors are never earlier: steps at or before anchor - num_steps are in no
        # window again; a series logged at every step keeps one more window (the window
        # before the anchor's: LossNotDecreasing asks whether the loss fell over two).
        kept = 2 * num_steps if self.needed == 1 else num_steps
        while self.saved[0][0] <= anchor[0] - kept:
            _, gone = self.saved.popleft()
            self.values.pop(gone, None)

    def anchor(self, num_steps: int) -> tuple[int, int] | None:
        """The newest saved (mode step, global step) at least ``num_steps`` mode steps before
        the newest one: the end of the previous window."""
        newest = self.saved[-1][0] if self.saved else None
        found = None
        for entry in self.saved:
            if entry[0] > newest - num_steps:  # type: ignore[operator]
                break
            found = entry
        return found

    def window(self, end: int, num_steps: int) -> list[tuple[int, int]]:
        """The saved (mode step, global step) pairs in the mode steps (end - num_steps, end]."""
        return [e for e in self.saved if end - num_steps < e[0] <= end]


def span(mode: str, window: tuple[float, int, int]) -> str:
    """ "the mean over mode steps a..b", or "the value at mode step a" for one saved step."""
    _, first, last = window
    if first == last:
        return f"the value at {mode} step {first}"
    return f"the mean over {mode} steps {first}..{last}"


def lowest(a: float | None, b: float) -> float:
    """The smaller of two values, ignoring a missing or NaN one."""
    if a is None or math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)


def shortfalls(
    views: dict[tuple[str, str], LossView],
) -> list[tuple[str, str, int, int, float]]:
    """(tensor, mode, values read, values two windows need, noise %) of every view, keyed by
    (tensor, mode name), whose windows grew beyond what it logged
    (``rules_builtin._progress.too_few_values``)."""
    return [
        (name, mode, v.cadence.count, 2 * v.needed, v.cadence.noise_percent())
        for (name, mode), v in views.items()
        if v.cadence.count >= 2 and v.needed > 1
    ]
