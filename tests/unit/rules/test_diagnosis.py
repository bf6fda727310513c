"""The loss-progress classifier on labelled synthetic series: each shape gets its diagnosis,
with figures that say why."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluator.rules.diagnosis import classify, measure

RNG = np.random.default_rng(3)
STEPS = list(range(200))


def _noisy(curve: np.ndarray, sigma: float) -> list[float]:
    return list(curve + RNG.normal(0, sigma, len(curve)))


T = np.arange(200, dtype=float)
SERIES = {
    "converged": _noisy(0.05 + 2.25 * np.exp(-T / 15), 0.01),
    "not_learning": _noisy(np.full(200, 2.3), 0.03),
    "diverging": _noisy(1.0 + np.maximum(0, T - 100) * 0.02, 0.01),
    "oscillating": list(1.5 + np.where(T % 2 == 0, 0.8, -0.8) + RNG.normal(0, 0.05, 200)),
}


@pytest.mark.parametrize("kind", list(SERIES))
def test_a_series_gets_its_diagnosis(kind: str) -> None:
    """A converging, flat, rising or zig-zag loss is diagnosed as such."""
    trend = measure(STEPS, SERIES[kind])
    assert trend is not None
    assert classify(trend).kind == kind


def test_converged_says_how_far_it_fell_and_how_long_it_has_been_flat() -> None:
    """The converged words and figures give the fall since the start and the flat stretch."""
    trend = measure(STEPS, SERIES["converged"])
    assert trend is not None
    found = classify(trend, unit="TRAIN steps")
    assert found.figures["fall_percent"] > 95
    assert found.figures["flat_steps"] > 100
    assert "the run converged" in found.words and "flat for" in found.words


def test_a_rising_validation_loss_beside_a_falling_training_loss_is_overfitting() -> None:
    """Validation rising while training falls is overfitting, not divergence."""
    val = measure(
        STEPS, _noisy(1.0 - 0.4 * np.minimum(T, 50) / 50 + np.maximum(0, T - 50) * 0.005, 0.01)
    )
    train = measure(STEPS, SERIES["converged"])
    assert val is not None and train is not None
    assert classify(val, training=train).kind == "overfitting"
    assert classify(train, validation=val).kind == "overfitting"


def test_a_nan_loss_is_diverging() -> None:
    """A NaN or infinity in the recent values is divergence, naming the first such step."""
    trend = measure(
        STEPS[:10],
        [1.0, 2.0, 5.0, 50.0, math.inf, math.nan, math.nan, math.nan, math.nan, math.nan],
    )
    assert trend is not None
    found = classify(trend)
    assert found.kind == "diverging" and found.figures["first_non_finite_step"] == 4


def test_minibatch_noise_on_a_converged_loss_is_not_a_rise() -> None:
    """A converged loss with noise as large as its level stays converged, never diverging."""
    trend = measure(STEPS, _noisy(0.1 + 2.2 * np.exp(-T / 10), 0.05))
    assert trend is not None
    assert classify(trend).kind == "converged"


def test_a_rising_line_through_three_noisy_values_is_not_a_divergence() -> None:
    """A flat loss with 4 % batch noise, 11 values whose last three happen to rise by 12 % of
    the start, is not rising (a trend counts through MIN_TREND values or more); the same rise
    held by the level is."""
    flat = [1.012, 0.971, 0.969, 0.973, 1.028, 1.035, 0.982, 1.013, 0.951, 1.037, 1.073]
    trend = measure(list(range(len(flat))), flat)
    assert trend is not None and trend.change > 0.1 and not trend.rising()
    risen = measure(list(range(14)), [*flat, 1.3, 1.3, 1.3])
    assert risen is not None and risen.rising()
