"""What a loss did before a loss-progress rule fired: one shared reading for LossNotDecreasing,
Overtraining and Overfit, so that a run that simply converged can be told from a broken one.

A firing of those rules says the loss stopped improving; it does not say why. ``classify``
reads the loss's history (its saved values in one mode, in step order) and names one of

=================  ==========================================================================
``converged``      the loss fell beyond its noise (``fell``), did not stall after its first
                   steps (``stalled``) and has no large swings (``swings``): it learned and
                   sits near its low (a stop signal, not a fault)
``not_learning``   it never fell beyond its noise (or stalled), and has no large swings
``diverging``      it is rising: its recent level is above its lowest by more than ``RISE`` of
                   its starting value and more than the noise, or its recent trend rises by
                   that much; or it was NaN or infinite at any step
``oscillating``    no rise, but swings (noise) larger than ``SWING`` of its start; or its
                   training loss swings without having fallen
``overfitting``    a validation loss (an EVAL series, or ``val_X``/``validation-X`` beside a
                   training ``X``) that rose from its lowest (beyond its noise and by more
                   than ``OVERFIT_RISE`` of that lowest), or that no longer falls while more
                   than ``OVERFIT_GAP`` times above the training loss, while its training
                   loss fell beyond its noise and neither rises nor swings
=================  ==========================================================================

tested in that order (a NaN first, then overfitting, diverging, converged, oscillating,
not_learning). The figures that decide, all measured on the series itself:

* ``start``: the loss before training changed much: the median of its first
  ``START_VALUES`` values, so one noisy first batch never decides; every percentage is of
  ``|start|``;
* ``level``: the median of the recent part, the last ``max(MIN_RECENT, n // 4)`` values;
* ``fall_percent``: ``100 * (start - level) / |start|``;
* ``recent_change_percent``: the least-squares line through the recent part, its change from
  the first to the last recent step (negative: falling); a rising one counts as a rise only
  through ``MIN_TREND`` values or more (20 values or more in all): the line through 3 noisy
  values changes by 1.4 times the noise by chance, so a noisy plateau caught early is not
  taken for a divergence;
* ``noise_percent``: the spread of the step-to-step differences over the later half of the
  series (1.4826 times their median absolute deviation, over the square root of 2: the
  standard deviation of Gaussian noise), which a trend does not inflate, or the spread of the
  recent values around that line when larger (slow swings);
* ``rise_percent``: how far ``level`` is above ``lowest``, the lowest running median (of 1,
  3 or 5 values: fewer than 6, 20 or more values) before the recent part;
* ``flat_steps``: the steps since the running median last left a band around ``level`` of
  ``max(2 * noise, RISE * |start|)``;
* ``fell``: whether ``start - level`` exceeds ``NOISE_K`` standard errors of that difference
  (the noise over the counts of values behind the two medians) and ``MIN_FALL`` of
  ``|start|``: a sparse log's rounding or a lucky batch is not a fall, and a fall of 1 % on a
  noise-free series is too small to call learning. A fine-tune that starts near its optimum
  falls 8-15 % and flattens: that is converged, not not-learning;
* ``stalled``: fell less than ``CONVERGED_FALL`` of its start, all of it within the first
  ``EARLY_FRACTION`` of its steps (the lowest running median there is not above the level
  by more than the noise): a net stuck after its first updates;
* ``swings``: noise above ``SWING`` of the start.

A validation loss beside its training loss is measured from the training loss's start (one
initialisation; the first validation pass comes after some training), and while it has fewer
than ``MIN_RECENT`` values it is judged on the training loss (the words say so).

A rise or a trend counts only when it exceeds ``NOISE_K`` times the noise too, so the
minibatch noise of a healthy run is never read as a trend. The thresholds are deliberately
few and fixed: they describe the shape of the curve, not the rule's own parameters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = [
    "CONVERGED",
    "CONVERGED_FALL",
    "DIVERGING",
    "KINDS",
    "MIN_FALL",
    "NOT_LEARNING",
    "OSCILLATING",
    "OVERFITTING",
    "OVERFIT_GAP",
    "OVERFIT_RISE",
    "RISE",
    "SWING",
    "Diagnosis",
    "Trend",
    "classify",
    "measure",
]

CONVERGED, NOT_LEARNING, DIVERGING = "converged", "not_learning", "diverging"
OSCILLATING, OVERFITTING = "oscillating", "overfitting"
KINDS = (CONVERGED, NOT_LEARNING, DIVERGING, OSCILLATING, OVERFITTING)

START_VALUES = 3  # the start is the median of this many first values
OVERFIT_GAP = 1.0  # validation level more than this fraction above the training level
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
class Diagnosis:
    """A rule's reading of one firing: ``kind`` (one of ``KINDS``), the figures that decided
    it and ``words``, one sentence for people. ``note`` marks a firing the rule does not count
    as an issue (``ignore_converged``): it is logged and kept in the result file as a note."""

    kind: str
    words: str
    figures: Mapping[str, float | int | str] = field(default_factory=dict)
    note: bool = False


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


def classify(
    loss: Trend,
    *,
    training: Trend | None = None,
    validation: Trend | None = None,
    unit: str = "steps",
) -> Diagnosis:
    """The diagnosis of ``loss``. ``training`` is the training loss beside it when ``loss`` is
    a validation loss, ``validation`` the validation loss beside it when ``loss`` is a
    training loss; either makes ``overfitting`` possible. ``unit`` names the steps in the
    words ("TRAIN steps")."""
    if training is not None and training.finite and loss.finite:
        # The same loss on held-out data starts where training started (one initialisation;
        # the first validation pass comes after some training).
        loss = replace(
            loss, start=training.start, scale=abs(training.start) or loss.scale,
            first=training.first,
        )  # fmt: skip
    figures: dict[str, float | int | str] = dict(loss.figures())
    if not loss.finite or loss.first_bad_step is not None:  # NaN now, or at some step
        figures["first_non_finite_step"] = loss.first_bad_step or 0
        return Diagnosis(DIVERGING, _non_finite("loss", loss, unit), figures)
    pct = _percent
    if training is not None:
        if not training.finite:
            figures["first_non_finite_step"] = training.first_bad_step or 0
            return Diagnosis(DIVERGING, _non_finite("training loss", training, unit), figures)
        figures.update(training.figures("training_"))
        found = _overfitting(loss, training, figures)
        if found is not None:
            return found
    if validation is not None and validation.finite:
        figures.update(validation.figures("validation_"))
        found = _overfitting(validation, loss, figures)
        if found is not None:
            return found
    said = ""
    if training is not None and loss.count < MIN_RECENT and training.count > loss.count:
        said = f" (judged on the training loss: the validation loss has {loss.count} value(s))"
        loss = training
    rising = loss if loss.rising() else training if training and training.rising() else None
    if rising is loss and training is not None and training.swings():
        rising = None  # a validation loss that rises while its training loss swings: no trend
    if rising is not None:
        which = "the loss" if rising is loss else "the training loss"
        return Diagnosis(
            DIVERGING,
            f"{which} {_rise_words(rising, unit)}{said}: the run is diverging; lower the "
            "learning rate",
            figures,
        )
    fell = loss.fell() and not loss.stalled()
    swinging = loss.swings() or (training is not None and training.swings())
    if fell and not swinging:
        flat = (
            f"has been flat for {loss.flat_steps} {unit}"
            if loss.part(loss.change) > -RISE
            else f"is still falling slowly ({pct(loss.part(loss.change), signed=True)} of its "
            f"start over the last {loss.recent_steps} {unit})"
        )
        return Diagnosis(
            CONVERGED,
            f"the loss fell {pct(loss.fall)} (from {loss.start:.4g} to {loss.level:.4g}) and "
            f"{flat}{said}: the run converged; stop it if you wish",
            figures,
        )
    falling = -loss.change > max(RISE * loss.scale, NOISE_K * loss.noise)
    now = (
        f"is still falling ({pct(loss.part(loss.change), signed=True)} of its start over the "
        f"last {loss.recent_steps} {unit}), but has not fallen by most of its start yet"
        if falling
        else f"has been flat for {loss.flat_steps} {unit}"
    )
    if swinging:
        return Diagnosis(
            OSCILLATING,
            f"the loss swings without a trend (noise of ±{pct(loss.part(loss.noise))} of its "
            f"start; it {_moved(loss)}){said}: the run is oscillating; lower the learning rate or "
            "raise the batch size",
            figures,
        )
    return Diagnosis(
        NOT_LEARNING,
        f"the loss {_moved(loss)} (from {loss.start:.4g} to {loss.level:.4g}) and {now}{said}: "
        "the run is not learning (enough); check the learning rate, the initialisation and "
        "the data",
        figures,
    )


def _overfitting(
    validation: Trend, training: Trend, figures: dict[str, float | int | str]
) -> Diagnosis | None:
    """``overfitting`` when the validation loss rose from its lowest (beyond its noise and by
    ``OVERFIT_RISE`` of it) while the training loss is not rising. A gap alone is not: a
    healthy network with dropout or BatchNorm keeps its validation loss well above a
    training loss that falls to 0 while both fall. ``gap_percent`` goes into ``figures``."""
    level = training.level
    gap = (validation.level - level) / abs(level) if level else 0.0
    figures["gap_percent"] = _round(100 * gap)
    if training.rising() or not training.fell() or training.swings():
        return None  # overfitting is a validation loss rising while the training loss fell
    if validation.rose_from_lowest():
        return Diagnosis(OVERFITTING, _overfit_words(validation, training, "steps"), figures)
    still_falling = (
        validation.recent >= MIN_TREND and -validation.change > NOISE_K * validation.noise
    )
    if gap > OVERFIT_GAP and training.fall > max(validation.fall, 0) and not still_falling:
        return Diagnosis(OVERFITTING, _gap_words(validation, training, gap), figures)
    return None


def _gap_words(validation: Trend, training: Trend, gap: float) -> str:
    return (
        f"the validation loss ({validation.level:.4g}) is {_percent(gap)} above the training "
        f"loss ({training.level:.4g}) and no longer falls, while the training loss "
        f"{_moved(training)}: the model is overfitting; stop earlier or regularise"
    )


def _non_finite(which: str, trend: Trend, unit: str) -> str:
    return (
        f"the {which} became NaN or infinite (first at {unit.rstrip('s')} "
        f"{trend.first_bad_step}): the run diverged; lower the learning rate or clip the "
        "gradients"
    )


def _overfit_words(validation: Trend, training: Trend, unit: str) -> str:
    return (
        f"the validation loss {_rise_words(validation, unit)} while the training loss "
        f"{_moved(training)}: the model is overfitting; keep the weights of the best "
        "validation step, stop earlier or regularise"
    )


def _rise_words(trend: Trend, unit: str) -> str:
    """ "rose 12 % of its start above its lowest (1.1 to 1.3)", or the trend when that is
    what rises."""
    if trend.level - trend.lowest >= trend.change:
        return (
            f"rose {_percent(trend.rise)} of its start above its lowest ({trend.lowest:.4g} "
            f"to {trend.level:.4g})"
        )
    return (
        f"is rising: {_percent(trend.part(trend.change), signed=True)} of its start over "
        f"the last {trend.recent_steps} {unit} (now {trend.level:.4g})"
    )


def _percent(fraction: float, *, signed: bool = False) -> str:
    """ "96 %", "-3 %" (signed: "+4 %"); one significant digit below 1 %."""
    value = 100 * fraction
    if abs(value) >= 10_000:
        return f"{value:+.2g} %" if signed else f"{abs(value):.2g} %"
    if abs(value) < 1:
        value = float(f"{value:.1g}")
        return f"{value:+g} %" if signed else f"{abs(value):g} %"
    return f"{value:+.0f} %" if signed else f"{abs(value):.0f} %"


def _moved(trend: Trend) -> str:
    """ "fell 96 %", "fell only 3 %", "rose 4 %" since the start."""
    fall = trend.fall
    if trend.fell():
        return f"fell {_percent(fall)}"
    if fall >= 0.005:
        return f"fell only {_percent(fall)}"
    return "has not fallen" if fall > -0.005 else f"rose {_percent(-fall)} since its start"
