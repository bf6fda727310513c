"""bench/allowed/'s documented readings of Overtraining and Overfit, computed on a trial's values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.allowed import latest_allowed
from evaluator.formats import Collection
from evaluator.modes import ModeKeys

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


def _trial(make_trial: Callable[..., Any], values: Sequence[tuple[ModeKeys, float]]) -> Any:
    tensors, modes, counters = {}, {}, {}
    for step, (mode, value) in enumerate(values):
        mode_step = counters.get(mode, 0) if mode != GLOBAL else step
        counters[mode] = mode_step + 1
        tensors[step] = {"loss": np.float32(value)}
        modes[step] = (mode, mode_step)
    return make_trial(
        tensors, modes=modes, collections=[Collection("losses", include_regex=["^loss$"])]
    )


def test_overtraining_bound_follows_the_values(make_trial: Callable[..., Any]) -> None:
    """A training loss falling 5 % per value until step 9, then flat: every reading's best is
    at step 9, so the bound is the 5th value after it (step 14), not the 5th saved step
    after the onset (step 5, what counting saved steps alone gave)."""
    values = [(TRAIN, 0.95**s) for s in range(10)] + [(TRAIN, 0.95**9)] * 8
    assert latest_allowed("Overtraining", _trial(make_trial, values), 0, {}) == 14


def test_overtraining_bound_counts_saved_values_not_mode_steps(
    make_trial: Callable[..., Any],
) -> None:
    """A flat loss saved every 4 steps without modes (XGBoost): counting mode steps fires at
    step 8, counting saved values at step 20; the bound is the later reading."""
    trial = make_trial(
        {s: {"loss": np.float32(0.0)} for s in range(0, 40, 4)},
        collections=[Collection("losses", include_regex=["^loss$"])],
    )
    assert latest_allowed("Overtraining", trial, 0, {}) == 20


def test_overfit_bound_is_the_latest_reading_of_the_means(
    make_trial: Callable[..., Any],
) -> None:
    """A validation loss rising against a flat training loss: the pass means exceed the 10 %
    ratio at step 5, the cumulative means only at step 9, which bounds the rule (the onset
    alone gave 0)."""
    values: list[tuple[ModeKeys, float]] = []
    for val in (1.0, 1.05, 1.12, 1.2, 1.3):
        values += [(TRAIN, 1.0), (EVAL, val)]
    assert latest_allowed("Overfit", _trial(make_trial, values), 0, {}) == 9
