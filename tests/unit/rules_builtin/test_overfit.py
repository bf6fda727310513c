"""Overfit: phase means of validation vs training loss, patience, start_step, selection and
parameter errors."""

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
from rules_builtin.overfit import Overfit

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


@pytest.fixture
def make_trial(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_trial(phases)``: an ended trial from ``[(mode, [loss, ...]), ...]``, one global
    step per value, saving ``loss`` (in the losses collection) and ``acc``."""
    opened: list[Any] = []

    def make(phases: Sequence[tuple[ModeKeys, Sequence[float]]], *,
             collections: Sequence[Collection] = (Collection("losses", include_regex=["loss"]),)
             ) -> Any:
        root = tmp_path / f"trial{len(opened)}"
        writer = TrialWriter(root)
        writer.write_collections(list(collections))
        step, counters = 0, {TRAIN: 0, EVAL: 0}
        for mode, values in phases:
            for value in values:
                writer.write_step(step, {"loss": np.float32(value), "acc": np.float32(0.5)},
                                  mode=mode, mode_step=counters[mode])
                step, counters[mode] = step + 1, counters[mode] + 1
        writer.end_training()
        trial = create_trial(str(root))
        opened.append(trial)
        return trial

    yield make
    for trial in opened:
        trial.close()


def fired(rule: Overfit) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


# Training phases of 4 steps (means 1.0), then 2 EVAL steps each.
HEALTHY = [(TRAIN, [1.2, 1.0, 1.0, 0.8]), (EVAL, [1.0, 1.04]),
           (TRAIN, [0.9, 0.8, 0.8, 0.7]), (EVAL, [0.82, 0.84])]
OVERFIT = [(TRAIN, [1.2, 1.0, 1.0, 0.8]), (EVAL, [1.0, 1.04]),      # steps 0-5: ratio <= 0.04
           (TRAIN, [0.6, 0.5, 0.5, 0.4]), (EVAL, [0.9, 0.9]),       # steps 6-11: ratio 0.8
           (TRAIN, [0.3, 0.3, 0.3, 0.3]), (EVAL, [1.0, 1.2])]       # steps 12-17


def test_registered() -> None:
    """The registry finds Overfit by name, any case."""
    assert registry.lookup("OVERFIT") is Overfit


def test_healthy_validation_loss_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Validation means within 10 % of the preceding training means never fire."""
    assert fired(Overfit(make_trial(HEALTHY))) == ()


def test_fires_at_each_eval_step_above_the_threshold(make_trial: Callable[..., Any]) -> None:
    """With patience 1, every EVAL step whose phase mean exceeds the training mean by more than
    10 % fires: steps 10, 11 (0.9 vs 0.5) and 16, 17 (1.0, 1.1 vs 0.3)."""
    assert fired(Overfit(make_trial(OVERFIT))) == (10, 11, 16, 17)


def test_patience_needs_consecutive_eval_steps(make_trial: Callable[..., Any]) -> None:
    """With patience 3 the third consecutive EVAL step above the threshold (16) fires first."""
    assert fired(Overfit(make_trial(OVERFIT), patience="3")) == (16, 17)


def test_ratio_threshold_is_respected(make_trial: Callable[..., Any]) -> None:
    """With ratio_threshold 2 only the last phase (ratio 2.33 and 2.67) fires."""
    assert fired(Overfit(make_trial(OVERFIT), ratio_threshold="2")) == (16, 17)


def test_start_step_ignores_earlier_steps(make_trial: Callable[..., Any]) -> None:
    """Steps before start_step are neither compared nor used for the means."""
    assert fired(Overfit(make_trial(OVERFIT), start_step="12")) == (16, 17)


def test_tensor_regex_selects_the_compared_tensors(make_trial: Callable[..., Any]) -> None:
    """tensor_regex replaces the losses collection: a constant `acc` never fires."""
    assert fired(Overfit(make_trial(OVERFIT), tensor_regex="acc")) == ()


def test_without_a_losses_collection_every_scalar_is_compared(
        make_trial: Callable[..., Any]) -> None:
    """A trial without a `losses` collection compares every scalar tensor."""
    assert fired(Overfit(make_trial(OVERFIT, collections=[]))) == (10, 11, 16, 17)


@pytest.mark.parametrize(("parameter", "value"), [
    ("start_step", "first"), ("start_step", "-1"), ("patience", "1.5"), ("patience", "0"),
    ("ratio_threshold", "tenth"),
])
def test_bad_parameter_values_are_configuration_errors(
        make_trial: Callable[..., Any], parameter: str, value: str) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial(HEALTHY)
    with pytest.raises(ConfigurationError, match=rf"Overfit parameter {parameter} .*'{value}'"):
        Overfit(trial, **{parameter: value})


def test_bad_tensor_regex_is_a_configuration_error(make_trial: Callable[..., Any]) -> None:
    """An invalid regular expression names the parameter."""
    with pytest.raises(ConfigurationError, match="tensor_regex"):
        Overfit(make_trial(HEALTHY), tensor_regex="[")


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in Overfit.PARAMETERS}
    assert declared == {"tensor_regex": None, "start_step": "0", "patience": "1",
                        "ratio_threshold": "0.1"}
