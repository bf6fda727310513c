"""PoorWeightInitialization: its three checks, the first-steps window, modes and parameter
errors."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.testing import TrialWriter, compute_reductions
from evaluator.trial import create_trial
from evaluator.trial.trial import Trial
from rules_builtin import registry
from rules_builtin.poor_weight_initialization import PoorWeightInitialization

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
COLLECTIONS = [
    Collection("gradients", include_regex=["^gradients/"]),
    Collection("losses", include_regex=["loss"]),
]
RNG = np.random.default_rng(7)

Steps = dict[int, dict[str, object]]
Modes = Mapping[int, tuple[ModeKeys, int]]  # global step -> (mode, mode step)


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def with_variance(variance: float, size: int = 64) -> np.ndarray:
    """Values with exactly this (ddof=0) variance."""
    return np.tile([-1.0, 1.0], size // 2) * np.sqrt(variance)


def healthy(step: int) -> dict[str, object]:
    """Activation inputs with variances 1 and 4, spread-out gradients, a falling loss."""
    return {
        "layer0_relu_input": with_variance(1.0),
        "layer1_relu_input": with_variance(4.0),
        "gradients/layer0": RNG.normal(0, 0.1, 64).astype(np.float32),
        "loss": np.float32(1.0 / (step + 1)),
    }


def fired(rule: PoorWeightInitialization, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds PoorWeightInitialization by name, any case."""
    assert registry.lookup("poorweightinitialization") is PoorWeightInitialization


def test_healthy_start_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Variances within a factor 10, spread gradients and a falling loss: no fire."""
    assert fired(PoorWeightInitialization(make_trial({s: healthy(s) for s in range(12)}))) == ()


def test_activation_variances_far_apart(make_trial: Callable[..., Any]) -> None:
    """Variances 1 and 50 (ratio 50 > 10) at step 2 fire there; threshold 60 does not."""
    steps: Steps = {s: healthy(s) for s in range(5)}
    steps[2]["layer1_relu_input"] = with_variance(50.0)
    trial = make_trial(steps)
    assert fired(PoorWeightInitialization(trial)) == (2,)
    assert fired(PoorWeightInitialization(trial, threshold="60")) == ()


def test_a_zero_variance_layer_is_an_infinite_ratio(make_trial: Callable[..., Any]) -> None:
    """One layer with variance 0 beside one with variance 1 fires; two zero layers do not."""
    steps: Steps = {
        0: {**healthy(0), "layer1_relu_input": np.zeros(8)},
        1: {**healthy(1), "layer0_relu_input": np.zeros(8), "layer1_relu_input": np.zeros(8)},
    }
    assert fired(PoorWeightInitialization(make_trial(steps))) == (0,)


def test_activation_inputs_regex(make_trial: Callable[..., Any]) -> None:
    """activation_inputs_regex picks the layers compared: tanh inputs far apart fire only when
    selected, and a single selected layer has nothing to compare with."""
    steps: Steps = {
        s: {
            **healthy(s),
            "l0_tanh_input": with_variance(1.0),
            "l1_tanh_input": with_variance(1000.0),
        }
        for s in range(2)
    }
    trial = make_trial(steps)
    assert fired(PoorWeightInitialization(trial)) == ()
    assert fired(PoorWeightInitialization(trial, activation_inputs_regex="tanh_input$")) == (0, 1)
    assert fired(PoorWeightInitialization(trial, activation_inputs_regex="^l1_tanh")) == ()


def test_narrow_gradient_distribution(make_trial: Callable[..., Any]) -> None:
    """A gradient whose 5th-95th percentile spread is 1e-4 (< 0.001) at step 3 fires there;
    distribution_range 1e-5 does not."""
    steps: Steps = {s: healthy(s) for s in range(5)}
    steps[3]["gradients/layer0"] = np.linspace(0, 1e-4, 101) / 0.9  # p95 - p5 = 1e-4
    trial = make_trial(steps)
    assert fired(PoorWeightInitialization(trial)) == (3,)
    assert fired(PoorWeightInitialization(trial, distribution_range="1e-5")) == ()


def test_loss_not_decreasing_within_patience(make_trial: Callable[..., Any]) -> None:
    """A loss lowest at step 1 and rising after: at steps 5 and 6 the jump after step 0 makes
    the series noisy (window means, not complete yet); from step 7 the values compared rise
    smoothly, above the loss 5 steps earlier: 7, 8, 9 fire. With patience 3 the windows
    compare from step 5 on."""
    losses = [1.0, 0.9, 0.95, 0.97, 0.99, 1.0, 1.01, 1.02, 1.03, 1.04, 1.05]
    steps: Steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    trial = make_trial(steps)
    assert fired(PoorWeightInitialization(trial)) == (7, 8, 9)
    assert fired(PoorWeightInitialization(trial, patience="3")) == (5, 6, 7, 8, 9)


def test_a_stuck_loss_fires_patience_steps_after_the_first(make_trial: Callable[..., Any]) -> None:
    """A loss stuck at one value (noise-free) is not below its value patience steps earlier at
    step 5: it fires there, not once two full windows of 5 are past (step 9)."""
    steps: Steps = {s: {**healthy(s), "loss": np.float32(1.0986)} for s in range(10)}
    rule = PoorWeightInitialization(make_trial(steps))
    assert fired(rule)[0] == 5
    assert "noise 0% of the level: one value" in rule.evidence.summary()["reasons"][0]["sentence"]


def test_a_noisy_loss_waits_for_two_full_windows(make_trial: Callable[..., Any]) -> None:
    """A flat loss with +-10 % batch noise is judged on window means, from step 9 on."""
    losses = [1.0 + 0.1 * np.sin(2.3 * s) for s in range(10)]
    steps: Steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    rule = PoorWeightInitialization(make_trial(steps))
    fired(rule)
    checks = [c for c in rule.evidence.summary()["closest"]
              if c["parameter"] == "loss decrease required (%)"]  # fmt: skip
    assert checks and all(c["step"] == 9 for c in checks)


def test_the_loss_history_holds_the_two_windows_only(make_trial: Callable[..., Any]) -> None:
    """Only the last 2 * patience training steps are kept (each step compares two windows of
    them): a long job costs the same per step at its end as at its start."""
    losses = [1.0 - 0.001 * s for s in range(60)]
    steps: Steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    rule = PoorWeightInitialization(make_trial(steps), patience="4", steps="60")
    assert fired(rule) == ()
    assert [s for s, _ in rule._losses["loss"]] == list(range(52, 60))


def test_running_mean_loss_of_a_healthy_keras_epoch_does_not_fire(
    make_trial: Callable[..., Any],
) -> None:
    """Keras' running mean starts with one low batch, climbs, then falls slowly: the window
    means fall, so nothing fires (the lowest-single-value test fired at step 5)."""
    losses = [1.041, 1.098, 1.126, 1.145, 1.125, 1.107, 1.099, 1.099, 1.097, 1.089]
    steps: Steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    rule = PoorWeightInitialization(make_trial(steps))
    assert fired(rule) == ()
    (check,) = [
        c
        for c in rule.evidence.summary()["closest"]
        if c["parameter"] == "loss decrease required (%)"
    ]
    assert check["step"] == 9 and check["value"] > 0


def test_a_new_lowest_loss_resets_patience(make_trial: Callable[..., Any]) -> None:
    """A loss that reaches a new lowest value every 4 steps never waits 5 steps: no fire."""
    losses = [1.0, 1.1, 1.1, 1.1, 0.9, 1.0, 1.0, 1.0, 0.8, 0.85]
    steps: Steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    assert fired(PoorWeightInitialization(make_trial(steps))) == ()


def test_nan_losses(make_trial: Callable[..., Any]) -> None:
    """A NaN loss never counts as a decrease: NaN throughout fires from step 5 (patience) on; a
    NaN first loss followed by falling numbers does not fire."""
    nan = float("nan")
    steps: Steps = {s: {**healthy(s), "loss": np.float32(nan)} for s in range(10)}
    assert fired(PoorWeightInitialization(make_trial(steps))) == (5, 6, 7, 8, 9)
    losses = [nan, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35]
    steps = {s: {**healthy(s), "loss": np.float32(v)} for s, v in enumerate(losses)}
    assert fired(PoorWeightInitialization(make_trial(steps))) == ()


def test_only_the_first_steps_are_checked(make_trial: Callable[..., Any]) -> None:
    """Bad activations at steps 9 and 10 fire at 9 only (steps=10); steps=11 fires at both."""
    steps: Steps = {s: healthy(s) for s in range(12)}
    for s in (9, 10):
        steps[s]["layer1_relu_input"] = with_variance(500.0)
    trial = make_trial(steps)
    assert fired(PoorWeightInitialization(trial)) == (9,)
    assert fired(PoorWeightInitialization(trial, steps="11")) == (9, 10)


def test_only_training_steps_are_checked(make_trial: Callable[..., Any]) -> None:
    """TRAIN 0-2, EVAL 3-4, TRAIN 5: bad activations at an EVAL step do not fire, and the window
    counts TRAIN steps (TRAIN step 3 is global step 5)."""
    modes = {0: (TRAIN, 0), 1: (TRAIN, 1), 2: (TRAIN, 2), 3: (EVAL, 0), 4: (EVAL, 1), 5: (TRAIN, 3)}
    steps: Steps = {s: healthy(s) for s in range(6)}
    steps[3]["layer1_relu_input"] = with_variance(500.0)
    steps[5]["layer1_relu_input"] = with_variance(500.0)
    trial = make_trial(steps, modes=modes)
    assert fired(PoorWeightInitialization(trial)) == (5,)
    assert fired(PoorWeightInitialization(trial, steps="3")) == ()


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("threshold", "x10", "a number"),
        ("distribution_range", "narrow", "a number"),
        ("patience", "5s", "a whole number"),
        ("patience", "0", "a whole number >= 1"),
        ("steps", "ten", "a whole number"),
        ("steps", "-1", "a whole number >= 1"),
        ("activation_inputs_regex", "relu_input(", "a regular expression"),
        ("activation_inputs_regex", " ", "a regular expression"),
    ],
)
def test_parameter_errors(
    make_trial: Callable[..., Any], name: str, value: str, expected: str
) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial({0: healthy(0)})
    message = f"PoorWeightInitialization parameter {name} must be {expected}, got {value!r}"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        PoorWeightInitialization(trial, **{name: value})


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in PoorWeightInitialization.PARAMETERS]
    assert declared == [
        ("activation_inputs_regex", None),
        ("threshold", "10.0"),
        ("distribution_range", "0.001"),
        ("patience", "5"),
        ("steps", "10"),
    ]


def test_windows_and_single_steps_give_the_same_evidence(
    make_trial: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variances and gradient spreads over windows of steps (ours) and of each step alone (a
    trial without a batch read, as smdebug's) give the same comparisons and firings; both use
    the hook's saved variance where it saved one beside the raw value (step 2) or alone (step
    6), and judge float16 and integer gradients (steps 4, 5) as their values."""
    steps: Steps = {s: healthy(s) for s in range(10)}
    steps[4]["gradients/layer0"] = (np.linspace(0, 1e-4, 101) / 0.9).astype(np.float16)
    steps[5]["gradients/layer0"] = np.full(8, 3, np.int32)
    del steps[6]["layer0_relu_input"]
    steps[7]["gradients/layer0"] = np.ones(1, np.float32)  # fewer than two values: skipped
    reductions = {
        2: {"layer1_relu_input": compute_reductions(with_variance(50.0), ["variance"])},
        6: {"layer0_relu_input": compute_reductions(with_variance(0.01), ["variance"])},
    }

    def run() -> str:
        rule = PoorWeightInitialization(make_trial(steps, reductions=reductions))
        fired_steps = fired(rule)
        assert fired_steps == (2, 4, 5, 6)
        return json.dumps([fired_steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    assert windowed == run()


def test_a_keras_run_whose_first_batch_was_low_does_not_fire(tmp_path: Path) -> None:
    """Keras' running mean after one low first batch climbs for a few steps (1.001 at step 0,
    1.07-1.09 over steps 1..5, as on a healthy run written by smdebug's real Keras hook): read
    as the batch means behind it, the loss falls between the two windows and nothing fires;
    the running means as saved, judged as one smooth series, fired at step 5."""
    batches = [1.001, 1.16, 1.10, 1.05, 1.12, 1.08, 1.02, 0.99, 1.03, 0.97, 1.0, 0.96]
    writer = TrialWriter(tmp_path / "keras")
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    for s in range(len(batches)):
        running = np.float32(np.mean(batches[: s + 1]))
        writer.write_step(s, {"loss": running}, mode=ModeKeys.TRAIN, mode_step=s)
    end = len(batches)
    with writer.step_writer(end) as w:  # Keras' epoch-end logs: loss and val_loss
        w.write_tensor(np.float32(np.mean(batches)), "loss", mode=ModeKeys.EVAL, mode_step=0)
        w.write_tensor(np.float32(1.05), "val_loss", mode=ModeKeys.EVAL, mode_step=0)
    writer.end_training()
    with create_trial(str(tmp_path / "keras")) as trial:
        rule = PoorWeightInitialization(trial)
        assert fired(rule) == ()
        saved = [float(np.mean(batches[: s + 1])) for s in range(6)]
        assert np.mean(saved[1:6]) > saved[0]  # the saved means alone would not fall
