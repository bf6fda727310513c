"""LossNotDecreasing: the 2019 test vectors, the formula, modes, selection and parameter errors."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError, RuleEvaluationConditionMet
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin._running_means import RunningMeans
from rules_builtin.loss_not_decreasing import LossNotDecreasing
from tests.support.keras_like import STUCK_BATCHES, hook_trial, write_keras_like

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
LOSSES = Collection("losses", include_regex=["loss"])
# 2019 vector: losses saved every 4 steps.
VECTOR_1 = {0: 0.30, 4: 0.33, 8: 0.31, 12: 0.30, 16: 0.28}
# 2019 second vector; the values before step 20 are assumed to be those of the first.
VECTOR_2 = {**VECTOR_1, 20: 0.2, 24: 0.42}

Step = tuple[int, ModeKeys, float]  # global step, mode, loss


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """``make_trial(steps)``: an ended trial saving ``loss`` at (global step, mode, value)."""

    def make(
        steps: Sequence[Step], *, name: str = "loss", extra: dict[str, object] | None = None
    ) -> Any:
        tensors, modes, counters = {}, {}, {}
        for step, mode, value in steps:
            mode_step = counters.get(mode, 0) if mode != GLOBAL else step
            counters[mode] = mode_step + 1
            tensors[step] = {name: np.float32(value), **(extra or {})}
            modes[step] = (mode, mode_step)
        return make_trial(tensors, collections=[LOSSES], modes=modes)

    return make


def global_steps(values: dict[int, float]) -> list[Step]:
    return [(s, GLOBAL, v) for s, v in values.items()]


def fired(rule: LossNotDecreasing, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds LossNotDecreasing by name, any case."""
    assert registry.lookup("lossnotdecreasing") is LossNotDecreasing


# ---------------------------------------------------------------------- the 2019 vectors
# Saved every 4 steps: AWS's reading (noise_aware=false); five values cannot show their noise,
# so the noise-aware reading waits for more (tests/unit/rules_builtin/test_sparse_logs.py).


def test_vector_1_fires_at_step_12_with_the_2019_default(make_trial: Callable[..., Any]) -> None:
    """2019 vector 1, diff_percent 0 (the 2019 default): step 12 equals step 0, so it fires there
    and only there (16 is not 10 steps after 12)."""
    trial = make_trial(global_steps(VECTOR_1))
    assert fired(LossNotDecreasing(trial, diff_percent="0", noise_aware="False")) == (12,)


def test_vector_1_fires_at_step_12_with_todays_default(make_trial: Callable[..., Any]) -> None:
    """2019 vector 1 with the documented default diff_percent 0.1 gives the same answer."""
    trial = make_trial(global_steps(VECTOR_1))
    assert fired(LossNotDecreasing(trial, noise_aware="False")) == (12,)


def test_vector_1_from_step_13_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """2019 vector 1 invoked from step 13: step 16 is compared with step 4 (saved before the
    start) and went down, so nothing fires."""
    trial = make_trial(global_steps(VECTOR_1))
    assert (
        fired(LossNotDecreasing(trial, diff_percent="0", noise_aware="False"), start_step=13) == ()
    )


def test_vector_2_fires_at_12_and_24_not_first_at_24(make_trial: Callable[..., Any]) -> None:
    """2019 vector 2 with diff_percent 20: our documented formula fires at 12 (no 20 % decrease
    since step 0) and at 24 (mean of 16..24, 0.30, vs mean of 4..12, 0.313); the 2019 rule first fired at 24 because it read
    diff_percent as a tolerated increase, which the current documentation contradicts."""
    trial = make_trial(global_steps(VECTOR_2))
    assert fired(LossNotDecreasing(trial, diff_percent="20", noise_aware="False")) == (12, 24)


# ---------------------------------------------------------------------- the formula


def test_steadily_decreasing_loss_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """A loss falling 5 % per step never fires."""
    trial = make_trial(global_steps({s: 0.95**s for s in range(40)}))
    assert fired(LossNotDecreasing(trial)) == ()


def test_evaluates_every_num_steps_against_the_newest_step_num_steps_back(
    make_trial: Callable[..., Any],
) -> None:
    """Saving every 3 steps with num_steps 10, a flat loss is evaluated (and fires) at steps 12,
    24 and 36: each the first saved step 10 or more after the last evaluation."""
    trial = make_trial(global_steps({s: 1.0 for s in range(0, 40, 3)}))
    assert fired(LossNotDecreasing(trial)) == (12, 24, 36)


def test_a_small_decrease_below_diff_percent_fires(make_trial: Callable[..., Any]) -> None:
    """A 1 % decrease over num_steps fires with diff_percent 2 and not with diff_percent 0.5."""
    steps = global_steps({0: 1.0, 1: 0.99})
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", diff_percent="2")) == (1,)
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", diff_percent="0.5")) == ()


def test_rising_above_the_best_value_fires_until_back_within_the_threshold(
    make_trial: Callable[..., Any],
) -> None:
    """After a spike (step 2), a loss going down again still fires while it is more than
    increase_threshold_percent above its lowest value (0.5 at step 1)."""
    values = {0: 1.0, 1: 0.5, 2: 2.0, 3: 1.0, 4: 0.51}
    trial = make_trial(global_steps(values))
    assert fired(LossNotDecreasing(trial, num_steps="1")) == (2, 3)
    relaxed = LossNotDecreasing(
        make_trial(global_steps(values)), num_steps="1", increase_threshold_percent="100"
    )
    assert fired(relaxed) == (2,)


def test_nan_loss_fires(make_trial: Callable[..., Any]) -> None:
    """A NaN loss counts as not decreasing."""
    trial = make_trial(global_steps({0: 1.0, 1: float("nan")}))
    assert fired(LossNotDecreasing(trial, num_steps="1")) == (1,)


# ---------------------------------------------------------------------- modes


def test_unset_mode_checks_train_until_eval_has_history(make_trial: Callable[..., Any]) -> None:
    """With mode unset, a flat TRAIN loss fires while EVAL has fewer than num_steps mode steps;
    once EVAL can be compared, only EVAL steps are evaluated (a falling EVAL loss: no fire)."""
    steps: list[Step] = []
    g = 0
    for epoch in range(6):
        for _ in range(4):
            steps.append((g, TRAIN, 1.0))
            g += 1
        steps.append((g, EVAL, 1.0 - 0.1 * epoch))
        g += 1
    trial = make_trial(steps)
    # TRAIN mode step 4 (global 5) is the first one 4 mode steps after 0; EVAL mode step 4
    # (global 24) makes EVAL comparable, so later TRAIN steps are no longer evaluated.
    assert fired(LossNotDecreasing(trial, num_steps="4")) == (5, 10, 15, 20)


def test_explicit_mode_train_ignores_eval(make_trial: Callable[..., Any]) -> None:
    """mode=TRAIN checks only TRAIN steps, numbered by TRAIN mode step."""
    steps = [(0, TRAIN, 1.0), (1, EVAL, 5.0), (2, TRAIN, 0.5), (3, EVAL, 9.0), (4, TRAIN, 0.4)]
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", mode="TRAIN")) == ()
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", mode="EVAL")) == (3,)


def test_explicit_mode_global_follows_training_and_never_pools_modes(
    make_trial: Callable[..., Any],
) -> None:
    """mode=GLOBAL follows the training series in TRAIN mode steps; EVAL values never join it."""
    steps = [(0, TRAIN, 1.0), (1, EVAL, 2.0)]
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", mode="GLOBAL")) == ()
    steps = [(0, TRAIN, 1.0), (1, EVAL, 0.1), (2, TRAIN, 1.0)]
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1", mode="GLOBAL")) == (2,)


def test_unset_mode_prefers_eval_once_comparable(make_trial: Callable[..., Any]) -> None:
    """A rising EVAL loss fires at the EVAL step once EVAL has num_steps of history."""
    steps = [(0, TRAIN, 1.0), (1, EVAL, 1.0), (2, TRAIN, 0.9), (3, EVAL, 1.5), (4, TRAIN, 0.8)]
    assert fired(LossNotDecreasing(make_trial(steps), num_steps="1")) == (3,)


# ---------------------------------------------------------------------- selection


def test_tensors_outside_the_losses_collection_need_a_regex(make_trial: Callable[..., Any]) -> None:
    """A flat tensor outside `losses` is checked only when tensor_regex names it."""
    steps = global_steps({0: 0.9, 1: 0.8})
    trial = make_trial(steps, extra={"metric": np.float32(1.0)})
    assert fired(LossNotDecreasing(trial, num_steps="1")) == ()
    trial = make_trial(steps, extra={"metric": np.float32(1.0)})
    assert fired(LossNotDecreasing(trial, num_steps="1", tensor_regex="metric")) == (1,)


def test_non_scalar_tensors_are_ignored(make_trial: Callable[..., Any]) -> None:
    """A selected tensor with more than one element is never checked."""
    trial = make_trial(global_steps({0: 1.0, 1: 1.0}), extra={"vec": np.ones(3, np.float32)})
    rule = LossNotDecreasing(
        trial, num_steps="1", tensor_regex="vec", use_losses_collection="false"
    )
    assert fired(rule) == ()


def test_use_losses_collection_false_without_selection_is_an_error(
    make_trial: Callable[..., Any],
) -> None:
    """With use_losses_collection false, collection_names or tensor_regex is required."""
    trial = make_trial(global_steps({0: 1.0}))
    with pytest.raises(ConfigurationError, match="collection_names or tensor_regex"):
        LossNotDecreasing(trial, use_losses_collection="False")


# ---------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("num_steps", "ten"),
        ("num_steps", "0"),
        ("diff_percent", "lots"),
        ("increase_threshold_percent", "5%"),
        ("use_losses_collection", "maybe"),
        ("mode", "TRAINING"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial(global_steps({0: 1.0}))
    with pytest.raises(
        ConfigurationError, match=rf"LossNotDecreasing parameter {parameter} .*'{value}'"
    ):
        LossNotDecreasing(trial, **{parameter: value})


def test_bad_tensor_regex_is_a_configuration_error(make_trial: Callable[..., Any]) -> None:
    """An invalid regular expression names the parameter."""
    trial = make_trial(global_steps({0: 1.0}))
    with pytest.raises(ConfigurationError, match="tensor_regex"):
        LossNotDecreasing(trial, tensor_regex="(")


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in LossNotDecreasing.PARAMETERS}
    assert declared == {
        "collection_names": None,
        "tensor_regex": None,
        "use_losses_collection": "True",
        "num_steps": "10",
        "diff_percent": "0.1",
        "increase_threshold_percent": "5",
        "mode": None,
        "ignore_converged": "False",
        "noise_aware": "True",
    }


# ---------------------------------------------------------------------- Keras-like and real trials


def _run(rule: Any) -> tuple[int, ...]:
    return invoke_rule(rule, 0, raise_eval_cond=False).fired_steps


def _real(name: str) -> Any:
    return create_trial(str(hook_trial(name)))


def test_keras_like_healthy_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """Interleaved TRAIN/EVAL with running-mean losses and epoch-end duplicates: no fire, and
    EVAL values are never compared with the (lower) TRAIN values."""
    rule = LossNotDecreasing(keras_like("healthy"))
    assert _run(rule) == ()
    assert rule.evidence.comparisons > 0


def test_keras_like_flat_run_fires(keras_like: Callable[..., Any]) -> None:
    """Learning rate 0 on a Keras-like trial: the loss did not decrease, and that is the reason."""
    rule = LossNotDecreasing(keras_like("flat"))
    assert _run(rule)
    reasons = rule.evidence.summary()["reasons"]
    assert reasons[0]["parameter"] == "diff_percent"


def test_keras_epoch_end_training_mean_is_not_an_eval_value(keras_like: Callable[..., Any]) -> None:
    """mode=EVAL never evaluates or compares with the epoch-end step's training mean."""
    trial = keras_like("healthy", epochs=8, train_batches=4, val_batches=3)
    rule = LossNotDecreasing(trial, mode="EVAL", num_steps="3")
    _run(rule)
    ends = {s for s in trial.steps() if trial.tensor_names(step=s).count("val_loss")}
    checked = {c["step"] for c in rule.evidence.summary()["closest"]}
    assert checked and not checked & ends
    assert rule.evidence.summary()["firings"] == 0


def test_num_steps_counts_mode_steps_not_global_steps(make_trial: Callable[..., Any]) -> None:
    """EVAL steps between TRAIN steps do not stretch the window: TRAIN step 2 is compared with
    TRAIN step 0 at num_steps=2 although they are 6 global steps apart."""
    steps = [
        (0, TRAIN, 1.0),
        (1, EVAL, 3.0),
        (2, EVAL, 3.0),
        (3, TRAIN, 1.0),
        (4, EVAL, 3.0),
        (5, EVAL, 3.0),
        (6, TRAIN, 1.0),
    ]
    rule = LossNotDecreasing(make_trial(steps), num_steps="2", mode="TRAIN")
    assert _run(rule) == (6,)
    assert rule.evidence.summary()["reasons"][0]["mode_step"] == 2


def test_records_both_conditions_at_every_evaluation(make_trial: Callable[..., Any]) -> None:
    """Each evaluation records diff_percent and increase_threshold_percent; none before."""
    rule = LossNotDecreasing(make_trial(global_steps({0: 1.0, 1: 0.5, 2: 0.25})), num_steps="1")
    assert _run(rule) == ()
    summary = rule.evidence.summary()
    assert summary["comparisons"] == 4
    assert {c["parameter"] for c in summary["closest"]} == {
        "diff_percent",
        "increase_threshold_percent",
    }


def test_selection_hint_names_the_losses_collection(make_trial: Callable[..., Any]) -> None:
    """The checked-nothing hint says what the selection looks for."""
    rule = LossNotDecreasing(make_trial(global_steps({0: 1.0})))
    (hint,) = rule.selection_hints()
    assert "losses" in hint.description and hint.parameter == "tensor_regex"


def test_real_keras_trials_with_default_parameters() -> None:
    """keras_flat_loss (learning rate 0) fires at TRAIN step 10."""
    with _real("keras_flat_loss") as trial:
        rule = LossNotDecreasing(trial)
        assert _run(rule)[0] == 20
        assert rule.evidence.summary()["reasons"][0]["mode"] == "TRAIN"


def test_eval_loss_is_not_compared_with_the_lowest_train_loss(
    make_trial: Callable[..., Any],
) -> None:
    """A falling EVAL loss well above the TRAIN loss does not fire: the lowest value is per mode."""
    steps = [
        (0, TRAIN, 1.0),
        (1, EVAL, 2.0),
        (2, TRAIN, 0.5),
        (3, EVAL, 1.8),
        (4, TRAIN, 0.25),
        (5, EVAL, 1.6),
    ]
    rule = LossNotDecreasing(make_trial(steps), num_steps="1")
    assert _run(rule) == ()
    assert rule.evidence.comparisons == 6


def test_a_smooth_loss_is_compared_with_the_anchors_value(make_trial: Callable[..., Any]) -> None:
    """A noise-free loss: at step 20 the mean over steps 11..20 is compared with the value at
    step 10 (AWS's comparison), and the firing says so and why (its noise)."""
    rule = LossNotDecreasing(make_trial(global_steps({s: 1.0 for s in range(21)})))
    assert _run(rule) == (10, 20)
    reason = rule.evidence.summary()["reasons"][-1]
    assert reason["quantity"].startswith(
        "decrease (%) of the loss from the value at GLOBAL step 10 to the mean over GLOBAL "
        "steps 11..20"
    )
    assert "noise 0% of the level: the anchor's value" in reason["sentence"]


def test_a_noisy_falling_loss_is_compared_with_the_window_ending_at_the_anchor(
    make_trial: Callable[..., Any],
) -> None:
    """A loss falling 5 % then 1 % per step with 3 % white batch noise does not fire: at step 20
    the mean over 11..20 is compared with the mean over 1..10 (one noisy batch does not
    decide), and the evidence's series names those windows."""
    batch = np.random.default_rng(7).normal(0.0, 0.03, 21)
    noisy = {s: 0.95 ** min(s, 10) * 0.99 ** max(s - 10, 0) * (1 + batch[s]) for s in range(21)}
    rule = LossNotDecreasing(make_trial(global_steps(noisy)))
    assert _run(rule) == ()
    at_20 = [
        q["quantity"]
        for q in rule.evidence.series()["series"]
        if q["parameter"] == "diff_percent" and [20, q["points"][-1][1]] == q["points"][-1]
    ]
    assert at_20 == ["decrease (%) of the loss from the mean over GLOBAL steps \u2026 to the mean "
                     "over GLOBAL steps \u2026"]  # fmt: skip


def test_a_noisy_flat_loss_fires_at_the_documented_single_value_comparison(
    make_trial: Callable[..., Any],
) -> None:
    """A flat loss with 3 % white batch noise whose value at step 10 is not below step 0's fires
    at 10, as AWS's single-value comparison does (window means would wait for 20), and the
    firing says the single values decided because the means showed no fall beyond the noise."""
    batch = np.random.default_rng(2).normal(0.0, 0.03, 21)
    flat = {s: 1.0 + batch[s] for s in range(21)}
    assert flat[10] >= flat[0]
    rule = LossNotDecreasing(make_trial(global_steps(flat)))
    assert _run(rule)[0] == 10
    reason = rule.evidence.summary()["reasons"][0]
    assert reason["quantity"].startswith(
        "decrease (%) of the loss from the value at GLOBAL step 0 to the value at GLOBAL step 10"
    )
    assert "the single values, the window means showing no decrease beyond" in reason["sentence"]


def test_a_noisy_loss_whose_window_means_keep_falling_is_quiet(
    make_trial: Callable[..., Any],
) -> None:
    """A loss falling 1 % per step with 10 % white batch noise, whose 10-step window means fall
    by 4 % or more at every evaluation: at step 30 the single values rise (0.722 against 0.701)
    and the last window's fall is within one standard error of the noise, but the fall over
    the last two windows is not, so the window means decide and it never fires."""
    batch = np.random.default_rng(20).normal(0.0, 0.1, 80)
    noisy = {s: 0.99**s * (1 + batch[s]) for s in range(80)}
    means = [float(np.mean([noisy[s] for s in range(end - 9, end + 1)])) for end in (10, 20, 30)]
    assert noisy[30] > noisy[20] and means[2] < 0.96 * means[1] < 0.96**2 * means[0]
    rule = LossNotDecreasing(make_trial(global_steps(noisy)))
    assert _run(rule) == ()
    (means,) = [
        q
        for q in rule.evidence.series()["series"]
        if q["quantity"].startswith("decrease (%) of the loss from the mean over")
    ]
    assert 30 in [step for step, _ in means["points"]]  # the window means decided at 30


def test_a_jump_beyond_the_noise_fires_before_the_window_means_catch_up(
    make_trial: Callable[..., Any],
) -> None:
    """A loss falling 0.5 % per step with 4 % white batch noise that jumps by 0.3 (about 35 %)
    at step 30 fires there on the single values: the jump is beyond the noise of two single
    values, so the fall of the window means over the last two windows does not overrule them
    (only one value of the window 21..30 has jumped)."""
    batch = np.random.default_rng(0).normal(0.0, 0.04, 60)
    jumped = {s: (0.995**s + (0.3 if s >= 30 else 0.0)) * (1 + batch[s]) for s in range(60)}
    rule = LossNotDecreasing(make_trial(global_steps(jumped)))
    assert _run(rule)[0] == 30
    reason = rule.evidence.summary()["reasons"][0]
    assert reason["quantity"].startswith(
        "decrease (%) of the loss from the value at GLOBAL step 20 to the value at GLOBAL step 30"
    )


def test_a_plateau_fires_at_the_first_evaluation_whose_anchor_is_on_it(
    make_trial: Callable[..., Any],
) -> None:
    """A loss falling 2 % per step until step 27, then exactly flat: evaluations at 10, 20, 30
    see a fall; 40 (anchor 30, on the plateau) fires, the latest any single-value reading of
    the documentation allows; window means of 10 would wait for 50."""
    values = {s: 0.98 ** min(s, 27) for s in range(60)}
    assert _run(LossNotDecreasing(make_trial(global_steps(values))))[0] == 40


def test_a_loss_that_never_falls_fires_at_the_first_comparison(
    make_trial: Callable[..., Any],
) -> None:
    """A loss stuck at one value from step 0 fires at the first step with a value num_steps
    earlier (step 10), in TRAIN mode steps between interleaved EVAL steps too."""
    steps: list[Step] = []
    for s in range(30):
        steps.append((2 * s, TRAIN, 0.6931))
        steps.append((2 * s + 1, EVAL, 0.6931))
    fired_at = _run(LossNotDecreasing(make_trial(steps), mode="TRAIN"))
    assert fired_at[0] == 20  # TRAIN mode step 10


def test_noisy_decreasing_dense_loss_is_quiet(make_trial: Callable[..., Any]) -> None:
    """A loss saved every step, falling 1 % per step with +-10 % batch noise, does not fire once
    the windows are full (from step 19 on), though single values 10 steps apart often rise."""
    noisy = {s: 0.99**s * (1 + 0.1 * np.sin(2.3 * s)) for s in range(80)}
    rule = LossNotDecreasing(make_trial(global_steps(noisy)))
    assert [s for s in _run(rule) if s >= 19] == []
    assert any(noisy[s] >= noisy[s - 10] for s in range(19, 80))


def test_flat_dense_loss_fires(make_trial: Callable[..., Any]) -> None:
    """A flat loss saved every step with +-10 % batch noise fires."""
    flat = {s: 1.0 + 0.1 * np.sin(2.3 * s) for s in range(60)}
    assert _run(LossNotDecreasing(make_trial(global_steps(flat))))


def test_keras_running_means_are_compared_as_the_batch_means_behind_them(
    keras_like: Callable[..., Any],
) -> None:
    """A Keras run that does not learn (each epoch the same batch losses) fires at the second
    evaluation (TRAIN step 20, the first whose batches are all seen again), comparing the
    means of the batches behind Keras' running means, and says so."""
    trial = keras_like("stuck", epochs=4, train_batches=12, val_batches=2)
    rule = LossNotDecreasing(trial)
    steps = _run(rule)
    assert steps and trial.mode_modestep(steps[0]) == (TRAIN, 20)
    sentence = rule.evidence.summary()["reasons"][0]["sentence"]
    assert "Keras' running means read as their batches' means" in sentence


def test_real_keras_run_that_never_learns_fires_at_the_documented_comparison() -> None:
    """keras_sigmoid_flat (real KerasHook trial, loss never falls) fires at TRAIN step 20
    (global 22), where AWS compares the value there with TRAIN step 10: the restart of the
    running mean at epoch 1 is not read as a fall."""
    trial = _real("keras_sigmoid_flat")
    steps = _run(LossNotDecreasing(trial))
    assert steps[0] == 22 and trial.mode_modestep(22) == (TRAIN, 20)


def test_running_means_give_the_batch_losses_of_a_keras_trial(
    keras_like: Callable[..., Any],
) -> None:
    """At every TRAIN step of a Keras-like trial saved every step, the batch mean behind the
    running mean is that batch's loss (the epoch restarts found from the EVAL passes)."""
    trial = keras_like("stuck", epochs=3, train_batches=12, val_batches=2)
    means = RunningMeans(trial)
    assert means.applies("loss", TRAIN)
    for mode_step in trial.steps(mode=TRAIN):
        step = trial.global_step(TRAIN, mode_step)
        found = means.batch_mean("loss", TRAIN, mode_step, step)
        assert found == pytest.approx(STUCK_BATCHES[mode_step % 12], rel=1e-4)
        assert means.position(TRAIN, mode_step, step) == mode_step % 12


def test_running_means_leave_other_losses_as_saved(make_trial: Callable[..., Any]) -> None:
    """A loss without Keras' epoch-end logs or batch log (PyTorch, GradientTape) is not a
    running mean."""
    trial = make_trial([(0, TRAIN, 1.0), (1, EVAL, 2.0), (2, TRAIN, 0.5)])
    assert not RunningMeans(trial).applies("loss", TRAIN)


def test_a_live_keras_trial_is_read_as_running_means_once_it_shows_them(
    tmp_path: Path, opened_trials: list[Any]
) -> None:
    """On a live Keras trial whose first epoch-end log arrives after TRAIN step 10 was judged,
    the values read before are turned into batch means too: the rule fires where it does on
    the complete trial."""
    done = write_keras_like(tmp_path / "done", "stuck", epochs=4, train_batches=16, val_batches=2)
    complete = create_trial(str(done))
    opened_trials.append(complete)
    expected = _run(LossNotDecreasing(complete))
    live_dir = tmp_path / "live"
    shutil.copytree(done, live_dir, ignore=shutil.ignore_patterns("training_job_end.ts"))
    later = [d for d in (live_dir / "events").iterdir() if int(d.name) >= 12]
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for d in later:  # the steps from 12 on are written later
        shutil.move(str(d), hidden / d.name)
        for index in live_dir.glob(f"index/*/{d.name}_worker_0.json"):
            shutil.move(str(index), hidden / f"{d.name}.json")
    live = create_trial(str(live_dir))
    opened_trials.append(live)
    rule = LossNotDecreasing(live)
    fired = [s for s in range(12) if _fires(rule, s)]
    for d in later:
        shutil.move(str(hidden / d.name), live_dir / "events" / d.name)
        index = live_dir / "index" / "000000000" / f"{d.name}_worker_0.json"
        shutil.move(str(hidden / f"{d.name}.json"), index)
    shutil.copy(done / "training_job_end.ts", live_dir / "training_job_end.ts")
    fired += [s for s in range(12, max(complete.steps()) + 1) if _fires(rule, s)]
    assert expected and tuple(fired) == expected


def _fires(rule: LossNotDecreasing, step: int) -> bool:
    try:
        rule.invoke(step)
    except RuleEvaluationConditionMet:
        return True
    return False


def test_a_loss_at_zero_is_at_its_floor(make_trial: Callable[..., Any]) -> None:
    """A loss that falls to exactly 0 and stays there (an error rate on data the model fits)
    does not fire: at its floor it has nothing left to fall; a loss stuck above 0 still does."""
    at_floor = {s: max(0.0, 0.5 - 0.05 * s) for s in range(60)}
    assert not _run(LossNotDecreasing(make_trial(global_steps(at_floor))))
    stuck = {s: max(0.01, 0.5 - 0.05 * s) for s in range(60)}
    assert _run(LossNotDecreasing(make_trial(global_steps(stuck))))
