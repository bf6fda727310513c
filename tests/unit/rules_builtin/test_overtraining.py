"""Overtraining: patience in saved values per mode, the relative delta, and parameter errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from tests.support.keras_like import hook_trial

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """``make_trial([(mode, loss), ...])``: an ended trial, one global step per entry, saving
    ``loss`` in the losses collection and an unselected ``other``."""

    def make(values: Sequence[tuple[ModeKeys, float]]) -> Any:
        tensors, modes, counters = {}, {}, {}
        for step, (mode, value) in enumerate(values):
            mode_step = counters.get(mode, 0) if mode != GLOBAL else step
            counters[mode] = mode_step + 1
            tensors[step] = {"loss": np.float32(value), "other": np.float32(1.0)}
            modes[step] = (mode, mode_step)
        return make_trial(
            tensors, modes=modes, collections=[Collection("losses", include_regex=["^loss$"])]
        )

    return make


def fired(rule: Overtraining) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def train(*values: float) -> list[tuple[ModeKeys, float]]:
    return [(TRAIN, v) for v in values]


def test_registered() -> None:
    """The registry finds Overtraining by name, any case."""
    assert registry.lookup("overTraining") is Overtraining


def test_improving_losses_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Training and validation losses falling 5 % per saved value never fire."""
    values = [(TRAIN if s % 3 else EVAL, 0.95**s) for s in range(60)]
    assert fired(Overtraining(make_trial(values))) == ()


def test_train_plateau_fires_after_patience_train_values(make_trial: Callable[..., Any]) -> None:
    """A training loss flat after step 2: the moving mean of 3 values (half of patience 5) is
    first judged at step 2 and last improves at step 4 (0.6); it fires at the 5th mean without
    a new best (step 9) and at every one after it."""
    trial = make_trial(train(1.0, 0.8, *[0.6] * 11))
    assert fired(Overtraining(trial)) == (9, 10, 11, 12)


def test_validation_plateau_fires_after_patience_validation_values(
    make_trial: Callable[..., Any],
) -> None:
    """A rising validation loss fires once its 10th validation pass after the best (the
    first) is complete, at the next TRAIN step, and the last pass at the end of the data;
    the improving training loss in between does not (the old moving mean of 5 EVAL values
    only took its first best at step 9 and fired at 29)."""
    values: list[tuple[ModeKeys, float]] = []
    for epoch in range(22):
        values += [(TRAIN, 0.9**epoch), (EVAL, 0.5 + 0.01 * epoch)]
    # EVAL values are at odd steps; the best is the first (step 1), the 10th pass after it
    # ends at step 21 and is judged at step 22.
    assert fired(Overtraining(make_trial(values))) == (*range(22, 43, 2), 43)


def test_validation_is_judged_on_pass_means(make_trial: Callable[..., Any]) -> None:
    """Two validation batches per pass whose losses differ by 10 % (one easy, one hard) are
    judged as their pass mean: a mean falling 2 % per pass never fires, although half the
    single values never beat the easy batch's best."""
    values: list[tuple[ModeKeys, float]] = []
    for epoch in range(30):
        level = 0.98**epoch
        values += [(TRAIN, level), (EVAL, 1.05 * level * 0.98), (EVAL, 0.95 * level * 0.98)]
    assert fired(Overtraining(make_trial(values), patience_train="50")) == ()
    # A flat pair: the 10th pass after the first ends at step 32, judged at the TRAIN step 33.
    flat = [(TRAIN, 1.0), (EVAL, 1.05), (EVAL, 0.95)] * 12
    assert fired(Overtraining(make_trial(flat), patience_train="50"))[0] == 33


def test_the_first_value_is_the_first_best(make_trial: Callable[..., Any]) -> None:
    """A training loss flat from its first value fires at the patience_train-th value after
    it (the moving mean is of the values so far until the window is full), not
    ``ceil(patience / 2) - 1`` values later."""
    assert fired(Overtraining(make_trial(train(*[1.0] * 7))))[0] == 5


def test_nan_before_the_first_values_gives_no_best(make_trial: Callable[..., Any]) -> None:
    """NaN losses before the first finite one count as values without improvement, and the
    first finite value is the first best: the moving mean of the finite values of its window
    (the old mean stayed NaN while a NaN was in the window: its first best was at step 5,
    and it fired at step 10 here)."""
    nan = float("nan")
    assert fired(Overtraining(make_trial(train(nan, nan, nan, *[1.0] * 8))))[0] == 8
    falling = train(nan, nan, nan, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
    assert fired(Overtraining(make_trial(falling))) == ()


def test_delta_is_relative_to_the_best(make_trial: Callable[..., Any]) -> None:
    """A 0.6 % improvement per value is no new best with delta 0.01 (1 %), but two of them add
    up to one, so patience 2 is never reached; with delta 0.1 no later value is a new best
    (a moving mean of 1 value: half of patience 2)."""
    values = train(*(0.994**s for s in range(8)))
    assert fired(Overtraining(make_trial(values), patience_train="2")) == ()
    assert fired(Overtraining(make_trial(values), patience_train="2", delta="0.1")) == (
        2,
        3,
        4,
        5,
        6,
        7,
    )


def test_a_loss_stuck_at_zero_fires(make_trial: Callable[..., Any]) -> None:
    """A training loss of exactly 0 can never improve, so it fires after patience_train."""
    assert fired(Overtraining(make_trial(train(0, 0, 0, 0)), patience_train="2")) == (2, 3)


def test_a_loss_nan_from_its_first_values_fires(make_trial: Callable[..., Any]) -> None:
    """A loss NaN from the start never improves: it fires after patience_train values, rather
    than leaving the moving mean NaN and checking nothing."""
    nan = float("nan")
    result = invoke_rule(
        Overtraining(make_trial(train(*[nan] * 6)), patience_train="2"), raise_eval_cond=False
    )
    assert result.fired_steps == (1, 2, 3, 4, 5)


def test_global_steps_count_as_training(make_trial: Callable[..., Any]) -> None:
    """A hook that never set modes saves GLOBAL steps, judged with patience_train (the first
    value is the first best; 3 values without a new best at step 3)."""
    values = [(GLOBAL, 1.0)] * 6
    assert fired(Overtraining(make_trial(values), patience_train="3")) == (3, 4, 5)


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("patience_train", "five"),
        ("patience_train", "0"),
        ("patience_validation", "2.5"),
        ("delta", "small"),
        ("delta", "-0.1"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial(train(1.0))
    with pytest.raises(
        ConfigurationError, match=rf"Overtraining parameter {parameter} .*'{value}'"
    ):
        Overtraining(trial, **{parameter: value})


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in Overtraining.PARAMETERS}
    assert declared == {
        "patience_train": "5",
        "patience_validation": "10",
        "delta": "0.01",
        "ignore_converged": "False",
        "noise_aware": "True",
    }


# ---------------------------------------------------------------------- Keras-like and real trials


def _run(rule: Any) -> tuple[int, ...]:
    return invoke_rule(rule, 0, raise_eval_cond=False).fired_steps


def _real(name: str) -> Any:
    return create_trial(str(hook_trial(name)))


def test_keras_like_healthy_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """A running mean that flattens late in every epoch (12 batches) does not fire: Keras
    losses are followed at their epoch-end logs."""
    rule = Overtraining(keras_like("healthy"))
    assert _run(rule) == ()
    assert rule.evidence.comparisons > 0


def test_keras_like_flat_run_fires(keras_like: Callable[..., Any]) -> None:
    """Learning rate 0: the moving mean of up to 3 training loss values does not improve on the
    first value for 5 saved TRAIN values (first epoch, step 5), then for 5 epoch-end logs
    after the first epoch-end log (an epoch mean is not averaged again)."""
    trial = keras_like("flat", epochs=11)
    rule = Overtraining(trial)
    steps = _run(rule)
    assert steps[0] == 5
    ends = [s for s in steps if "val_loss" in trial.tensor_names(step=s)]
    assert ends[0] == 6 * 15 - 1  # the sixth epoch end: 5 after the first
    reasons = rule.evidence.summary()["reasons"]
    assert reasons[0]["parameter"] == "patience_train"
    assert "moving mean of 3 values" in reasons[0]["quantity"]
    assert any("moving mean of 1 value)" in r["quantity"] for r in reasons if r["step"] in ends)


def test_train_and_eval_values_are_never_pooled(tmp_path: Path) -> None:
    """A low EVAL value does not become the TRAIN best (and vice versa)."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    counters = {TRAIN: 0, EVAL: 0}
    values = [(TRAIN, 1.0), (EVAL, 0.1), (TRAIN, 0.9), (EVAL, 0.09), (TRAIN, 0.8), (TRAIN, 0.7)]
    for step, (mode, value) in enumerate(values):
        writer.write_step(step, {"loss": np.float32(value)}, mode=mode, mode_step=counters[mode])
        counters[mode] += 1
    writer.end_training()
    with create_trial(str(tmp_path / "t")) as trial:
        rule = Overtraining(trial, patience_train="1", patience_validation="1")
        assert _run(rule) == ()


def test_selection_hint_has_no_parameter(make_trial: Callable[..., Any]) -> None:
    """Overtraining has no selection parameter: the hint gives advice instead."""
    rule = Overtraining(make_trial([(TRAIN, 1.0)]))
    (hint,) = rule.selection_hints()
    assert hint.parameter is None and "losses" in (hint.advice or "")


def test_real_keras_trials_with_default_parameters() -> None:
    """keras_flat_loss fires at its sixth epoch end (step 11): five epoch-end logs after the
    first do not improve on it."""
    with _real("keras_flat_loss") as trial:
        assert _run(Overtraining(trial))[0] == 11


def test_real_pytorch_trials_with_default_parameters() -> None:
    """pytorch_healthy (noisy per-batch losses) stays quiet; pytorch_flat_loss fires."""
    with _real("pytorch_healthy") as trial:
        rule = Overtraining(trial)
        assert _run(rule) == ()
        assert rule.evidence.comparisons > 0
    with _real("pytorch_flat_loss") as trial:
        assert _run(Overtraining(trial))


def test_noisy_decreasing_dense_loss_is_quiet(make_trial: Callable[..., Any]) -> None:
    """A per-batch loss falling 1 % per step with +-10 % noise never fires: its moving mean
    keeps improving."""
    noisy = [0.99**i * (1 + 0.1 * np.sin(2.3 * i)) for i in range(60)]
    assert fired(Overtraining(make_trial(train(*noisy)))) == ()


def test_flat_dense_loss_fires(make_trial: Callable[..., Any]) -> None:
    """A flat per-batch loss with +-10 % noise fires once the moving mean of 5 values has not
    improved for 5 values."""
    flat = [1.0 + 0.1 * np.sin(2.3 * i) for i in range(30)]
    assert fired(Overtraining(make_trial(train(*flat))))
