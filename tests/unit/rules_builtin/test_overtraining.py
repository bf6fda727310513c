"""Overtraining: patience in saved values per mode, the relative delta, and parameter errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.overtraining import Overtraining

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


@pytest.fixture
def make_trial(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_trial([(mode, loss), ...])``: an ended trial, one global step per entry, saving
    ``loss`` in the losses collection and an unselected ``other``."""
    opened: list[Any] = []

    def make(values: Sequence[tuple[ModeKeys, float]]) -> Any:
        root = tmp_path / f"trial{len(opened)}"
        writer = TrialWriter(root)
        writer.write_collections([Collection("losses", include_regex=["^loss$"])])
        counters: dict[ModeKeys, int] = {}
        for step, (mode, value) in enumerate(values):
            mode_step = counters.get(mode, 0) if mode != GLOBAL else step
            counters[mode] = mode_step + 1
            writer.write_step(step, {"loss": np.float32(value), "other": np.float32(1.0)},
                              mode=mode, mode_step=mode_step)
        writer.end_training()
        trial = create_trial(str(root))
        opened.append(trial)
        return trial

    yield make
    for trial in opened:
        trial.close()


def fired(rule: Overtraining) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def train(*values: float) -> list[tuple[ModeKeys, float]]:
    return [(TRAIN, v) for v in values]


def test_registered() -> None:
    """The registry finds Overtraining by name, any case."""
    assert registry.lookup("overTraining") is Overtraining


def test_improving_losses_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Training and validation losses falling 5 % per saved value never fire."""
    values = [(TRAIN if s % 3 else EVAL, 0.95 ** s) for s in range(60)]
    assert fired(Overtraining(make_trial(values))) == ()


def test_train_plateau_fires_after_patience_train_values(make_trial: Callable[..., Any]) -> None:
    """A training loss flat after step 2 fires at the 5th value without a new best (step 7) and
    at every flat value after it."""
    trial = make_trial(train(1.0, 0.8, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6))
    assert fired(Overtraining(trial)) == (7, 8)


def test_validation_plateau_fires_after_patience_validation_values(
        make_trial: Callable[..., Any]) -> None:
    """A rising validation loss fires at its 10th EVAL value after the best; the improving
    training loss in between does not."""
    values: list[tuple[ModeKeys, float]] = []
    for epoch in range(12):
        values += [(TRAIN, 1.0 - 0.05 * epoch), (EVAL, 0.5 + 0.01 * epoch)]
    # EVAL values are at odd steps; the best is the first (step 1); the 10th after is step 21.
    assert fired(Overtraining(make_trial(values))) == (21, 23)


def test_delta_is_relative_to_the_best(make_trial: Callable[..., Any]) -> None:
    """A 0.6 % improvement per value is no new best with delta 0.01 (1 %), but two of them add
    up to one, so patience 2 is never reached; with delta 0.1 no later value is a new best."""
    values = train(*(0.994 ** s for s in range(8)))
    assert fired(Overtraining(make_trial(values), patience_train="2")) == ()
    assert fired(Overtraining(make_trial(values), patience_train="2", delta="0.1")) == (
        2, 3, 4, 5, 6, 7)


def test_a_loss_stuck_at_zero_fires(make_trial: Callable[..., Any]) -> None:
    """A training loss of exactly 0 can never improve, so it fires after patience_train."""
    assert fired(Overtraining(make_trial(train(0, 0, 0)), patience_train="2")) == (2,)


def test_global_steps_count_as_training(make_trial: Callable[..., Any]) -> None:
    """A hook that never set modes saves GLOBAL steps, judged with patience_train."""
    values = [(GLOBAL, 1.0)] * 4
    assert fired(Overtraining(make_trial(values), patience_train="3")) == (3,)


@pytest.mark.parametrize(("parameter", "value"), [
    ("patience_train", "five"), ("patience_train", "0"), ("patience_validation", "2.5"),
    ("delta", "small"), ("delta", "-0.1"),
])
def test_bad_parameter_values_are_configuration_errors(
        make_trial: Callable[..., Any], parameter: str, value: str) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial(train(1.0))
    with pytest.raises(ConfigurationError,
                       match=rf"Overtraining parameter {parameter} .*'{value}'"):
        Overtraining(trial, **{parameter: value})


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in Overtraining.PARAMETERS}
    assert declared == {"patience_train": "5", "patience_validation": "10", "delta": "0.01"}
