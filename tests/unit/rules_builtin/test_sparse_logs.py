"""The loss rules on sparse and noisy logs (``noise_aware``): the noise is measured on the series,
a window that holds too few logged values grows to the fewest that tell a trend from it, and
AWS's reading stays one parameter away."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing, nothing_checked_error
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin._cadence import MIN_NOISY_VALUES, NOISE_MEMORY, Cadence, noise, values_needed
from rules_builtin.loss_not_decreasing import LossNotDecreasing
from rules_builtin.overfit import Overfit
from rules_builtin.overtraining import Overtraining

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
EVERY = 50  # a Trainer's logging_steps


def _write(
    root: Path, train: list[float], evals: list[float] | None = None, lr: Any = None
) -> Path:
    """A trial logged every EVERY steps: TRAIN ``loss`` at steps EVERY, 2 EVERY, ...; an EVAL
    ``loss`` pass after every 5th training log; ``learning_rate`` beside the loss."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    step, evals = 0, list(evals or [])
    for i, value in enumerate(train):
        tensors: dict[str, Any] = {"loss": np.float32(value)}
        if lr is not None:
            tensors["learning_rate"] = np.float32(lr(i))
        writer.write_step(step, tensors, mode=TRAIN, mode_step=(i + 1) * EVERY)
        step += 1
        if evals and (i + 1) % 5 == 0:
            writer.write_step(step, {"loss": np.float32(evals.pop(0))}, mode=EVAL, mode_step=i)
            step += 1
    writer.end_training()
    return root


def _fired(rule: Any) -> tuple[int, ...]:
    return tuple(invoke_rule(rule, raise_eval_cond=False).fired_steps)


def _kinds(rule: Any) -> set[str]:
    return {r["diagnosis"] for r in rule.evidence.summary()["reasons"]}


def _noisy_fall(n: int, seed: int = 0, noise_level: float = 0.05) -> list[float]:
    """A healthy fine-tune's logged loss: a slow exponential fall with noise."""
    rng = np.random.default_rng(seed)
    return [float((1.0 + np.exp(-i / 60)) * (1 + rng.normal(0, noise_level))) for i in range(n)]


def test_noise_measures_scatter_not_trend() -> None:
    """The scatter around the line through each value's neighbours: a straight or exponential
    fall has none, white noise of sigma 1 measures about 1."""
    rng = np.random.default_rng(1)
    assert noise(np.linspace(5, 1, 100).tolist()) == pytest.approx(0.0, abs=1e-9)
    assert noise(np.exp(-np.arange(40) / 5.0).tolist()) < 0.01
    assert 0.9 < noise(rng.normal(0, 1, 4000).tolist()) < 1.1
    assert noise([1.0, 2.0]) == 0.0


def test_values_needed_grow_with_the_noise() -> None:
    """A smooth series compares single values (AWS's reading); a noisy one needs the values
    whose window means resolve 1 %: 2 (sigma / 1 %)^2, at least MIN_NOISY_VALUES."""
    assert values_needed(0.0, 0.1) == 1
    assert values_needed(0.02, 0.1) == 1
    assert values_needed(1.0, 0.1) == MIN_NOISY_VALUES
    assert values_needed(10.0, 0.1) == 200
    assert values_needed(10.0, 0.1, means=1) == 100


def test_a_cadence_knows_its_interval_and_scale() -> None:
    """The interval is the median gap between logged steps; the scale the start's size."""
    cadence = Cadence()
    for i, v in enumerate([2.0, 1.8, 1.9, 1.5, 1.4, 1.3]):
        cadence.add(10 * (i + 1), v)
    assert cadence.interval() == 10.0
    assert cadence.span(5) == 50
    assert cadence.scale() == 2.0


def test_a_cadence_interval_is_the_median_gap_of_its_latest_steps() -> None:
    """An odd count of gaps takes the middle one, an even count the mean of the two middle
    ones (as numpy's median); a gap of 500 among gaps of 10 moves nothing; the interval
    follows each value added, over the latest NOISE_MEMORY steps only."""
    cadence = Cadence()
    assert cadence.interval() == 1.0  # fewer than two steps
    for step in (0, 1, 4):  # gaps 1, 3
        cadence.add(step, 1.0)
    assert cadence.interval() == 2.0
    cadence.add(504, 1.0)  # gaps 1, 3, 500
    assert cadence.interval() == 3.0
    step = 504
    for _ in range(NOISE_MEMORY):
        step += 10
        cadence.add(step, 1.0)
    assert cadence.interval() == 10.0  # the first gaps are out of memory


def test_a_noisy_healthy_sparse_log_stays_quiet(tmp_path: Path) -> None:
    """A loss logged every 50 steps that falls slowly under 5 % noise: AWS's reading (one
    value against the one 10 steps earlier) fires on an uptick; the noise-aware reading does
    not fire with any diagnosis but converged."""
    trial = create_trial(str(_write(tmp_path / "run", _noisy_fall(300))))
    aws = LossNotDecreasing(trial, noise_aware="False")
    assert _fired(aws) != ()
    for rule in (LossNotDecreasing(trial), Overtraining(trial)):
        _fired(rule)
        assert _kinds(rule) <= {"converged"}, rule.rule_name


def test_a_flat_noisy_sparse_log_fires_not_learning(tmp_path: Path) -> None:
    """A loss that never falls (5 % noise around 2.0) fires, diagnosed not_learning."""
    rng = np.random.default_rng(2)
    flat = [float(2.0 * (1 + rng.normal(0, 0.05))) for _ in range(200)]
    trial = create_trial(str(_write(tmp_path / "run", flat)))
    rule = LossNotDecreasing(trial)
    assert _fired(rule) != ()
    assert _kinds(rule) == {"not_learning"}


def test_the_window_grows_to_the_values_the_noise_needs(tmp_path: Path) -> None:
    """num_steps=10 on a log every 50 steps holds one value; the evidence names windows of
    the values the noise needs, never single values."""
    trial = create_trial(str(_write(tmp_path / "run", _noisy_fall(300))))
    rule = LossNotDecreasing(trial)
    _fired(rule)
    view = rule._losses["loss"].views[TRAIN]
    assert view.needed >= MIN_NOISY_VALUES
    assert view.steps >= view.needed * EVERY
    quantities = [s["quantity"] for s in rule.evidence.series()["series"]]
    assert not any("the value at" in q for q in quantities)


def test_no_judgement_while_the_learning_rate_warms_up(tmp_path: Path) -> None:
    """A loss flat for its first 40 logs while the logged learning rate rises, then falling:
    quiet (AWS's reading fires on the plateau)."""
    rng = np.random.default_rng(3)
    losses = [0.693 * (1 + rng.normal(0, 0.002)) for _ in range(40)]
    losses += [0.693 * np.exp(-i / 40) for i in range(1, 120)]
    warm = lambda i: 5e-5 * min(1.0, (i + 1) / 40)  # noqa: E731
    trial = create_trial(str(_write(tmp_path / "run", losses, lr=warm)))
    assert _fired(LossNotDecreasing(trial, noise_aware="False")) != ()
    rule = LossNotDecreasing(trial)
    _fired(rule)
    assert _kinds(rule) <= {"converged"}


def test_too_few_logged_values_say_how_many_are_needed(tmp_path: Path) -> None:
    """A noisy log too short for two windows ends 'Insufficient information' naming the values
    needed, never a verdict."""
    rng = np.random.default_rng(4)
    short = [float(2.0 * (1 + rng.normal(0, 0.2))) for _ in range(12)]
    trial = create_trial(str(_write(tmp_path / "run", short)))
    rule = LossNotDecreasing(trial)
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps == () and checked_nothing(rule, result)
    said = str(nothing_checked_error(rule, steps_visited=result.steps_evaluated))
    assert "has 12 logged values" in said and "are needed" in said


def test_a_clear_fall_on_a_short_log_is_a_verdict(tmp_path: Path) -> None:
    """Twelve logged values falling 60 % under 5 % noise: too few for the windows, but the
    fall between the halves is clear of the noise, so the rule checked it (no Error)."""
    rng = np.random.default_rng(5)
    falling = [float(2.0 * 0.92**i * (1 + rng.normal(0, 0.05))) for i in range(12)]
    trial = create_trial(str(_write(tmp_path / "run", falling)))
    rule = LossNotDecreasing(trial)
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps == () and not checked_nothing(rule, result)


def test_overfit_waits_for_a_rise_beyond_the_noise(
    tmp_path: Path, make_trial: Callable[..., Any]
) -> None:
    """Noisy validation passes that fall overall do not fire; the same passes followed by a
    steady rise fire, diagnosed overfitting. AWS's reading fires on the first pass that is not
    1 % below the best."""
    rng = np.random.default_rng(6)
    falling = [float(0.6 * 0.97**i * (1 + rng.normal(0, 0.04))) for i in range(16)]
    train = [float(1.0 * 0.97**i) for i in range(80)]
    trial = create_trial(str(_write(tmp_path / "fall", train, falling)))
    assert _fired(Overfit(trial, noise_aware="False")) != ()
    assert _fired(Overfit(trial)) == ()
    rising = falling[:8] + [falling[7] * 1.1**k for k in range(1, 9)]
    trial = create_trial(str(_write(tmp_path / "rise", train, rising)))
    rule = Overfit(trial)
    assert _fired(rule) != ()
    assert "overfitting" in _kinds(rule)
