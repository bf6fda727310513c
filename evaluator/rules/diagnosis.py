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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from evaluator.rules.loss_trend import (
    CONVERGED_FALL,
    MIN_FALL,
    MIN_RECENT,
    MIN_TREND,
    NOISE_K,
    OVERFIT_RISE,
    RISE,
    SWING,
    Trend,
    measure,
)

__all__ = [
    "CONVERGED",
    "CONVERGED_FALL",
    "DIVERGING",
    "KINDS",
    "MIN_FALL",
    "NOISE_K",
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

OVERFIT_GAP = 1.0  # validation level more than this fraction above the training level


@dataclass(frozen=True)
class Diagnosis:
    """A rule's reading of one firing: ``kind`` (one of ``KINDS``), the figures that decided
    it and ``words``, one sentence for people. ``note`` marks a firing the rule does not count
    as an issue (``ignore_converged``): it is logged and kept in the result file as a note."""

    kind: str
    words: str
    figures: Mapping[str, float | int | str] = field(default_factory=dict)
    note: bool = False


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
    swinging = loss.swings() or (training is not None and training.swings())
    return _settled(loss, swinging, said, unit, figures)


def _settled(
    loss: Trend, swinging: bool, said: str, unit: str, figures: dict[str, float | int | str]
) -> Diagnosis:
    """A loss that is not rising: ``converged`` when it fell (and did not stall) without
    large swings (``swinging``, its own or its training loss's), else ``oscillating`` when
    it swings, else ``not_learning``. ``said`` ends the words."""
    pct = _percent
    fell = loss.fell() and not loss.stalled()
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
    figures["gap_percent"] = float(f"{100 * gap:.4g}") if math.isfinite(gap) else gap
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
