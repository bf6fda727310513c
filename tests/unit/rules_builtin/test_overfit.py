"""Overfit: phase means of validation vs training loss, patience, start_step, selection and
parameter errors."""

from __future__ import annotations

import json
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
from rules_builtin.overfit import Overfit
from tests.support.keras_like import hook_trial

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """``make_trial(phases)``: an ended trial from ``[(mode, [loss, ...]), ...]``, one global
    step per value, saving ``loss`` (in the losses collection) and ``acc``."""

    def make(
        phases: Sequence[tuple[ModeKeys, Sequence[float]]],
        *,
        collections: Sequence[Collection] = (Collection("losses", include_regex=["loss"]),),
    ) -> Any:
        tensors, modes, step, counters = {}, {}, 0, {TRAIN: 0, EVAL: 0}
        for mode, values in phases:
            for value in values:
                tensors[step] = {"loss": np.float32(value), "acc": np.float32(0.5)}
                modes[step] = (mode, counters[mode])
                step, counters[mode] = step + 1, counters[mode] + 1
        return make_trial(tensors, collections=collections, modes=modes)

    return make


def fired(rule: Overfit) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


# Training phases of 4 steps (means 1.0), then 2 EVAL steps each.
HEALTHY = [
    (TRAIN, [1.2, 1.0, 1.0, 0.8]),
    (EVAL, [1.0, 1.04]),
    (TRAIN, [0.9, 0.8, 0.8, 0.7]),
    (EVAL, [0.82, 0.84]),
]
OVERFIT = [
    (TRAIN, [1.2, 1.0, 1.0, 0.8]),
    (EVAL, [1.0, 1.04]),  # steps 0-5: ratio <= 0.04
    (TRAIN, [0.6, 0.5, 0.5, 0.4]),
    (EVAL, [0.9, 0.9]),  # steps 6-11: ratio 0.8
    (TRAIN, [0.3, 0.3, 0.3, 0.3]),
    (EVAL, [1.0, 1.2]),
]  # steps 12-17
# OVERFIT and one more pass, validation 1.2 against training 0.3 (steps 18-23).
OVERFIT_LONG = [*OVERFIT, (TRAIN, [0.3, 0.3, 0.3, 0.3]), (EVAL, [1.2, 1.2])]


def test_registered() -> None:
    """The registry finds Overfit by name, any case."""
    assert registry.lookup("OVERFIT") is Overfit


def test_healthy_validation_loss_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Validation means within 10 % of the preceding training means never fire."""
    assert fired(Overfit(make_trial(HEALTHY))) == ()


def test_fires_once_per_complete_pass_above_the_threshold(make_trial: Callable[..., Any]) -> None:
    """As AWS reads it (noise_aware=false), with patience 1, each complete validation pass
    whose mean exceeds the training mean by
    more than 10 % and is not 1 % below the best earlier pass fires once: at step 18, the TRAIN
    step after pass 16-17 (1.1 vs 0.3), and at step 23, the last step of the final pass (1.2 vs
    0.3), judged when the data ends."""
    assert fired(Overfit(make_trial(OVERFIT_LONG), noise_aware="False")) == (18, 23)


def test_a_gap_while_validation_still_falls_is_not_overfitting(
    make_trial: Callable[..., Any],
) -> None:
    """Pass 10-11 (0.9) is 80 % above its training mean (0.5) but 12 % below the pass before:
    the validation loss still falls, so it does not fire; the first pass, with no earlier pass
    to fall from, never fires; the evidence records the fall that decided."""
    rule = Overfit(make_trial(OVERFIT[:4] + [(TRAIN, [0.5])]))
    assert fired(rule) == ()
    assert fired(Overfit(make_trial([(TRAIN, [1.0, 1.0]), (EVAL, [2.0, 2.0])]))) == ()
    falls = [c for c in rule.evidence.summary()["closest"] if "still falling" in c["parameter"]]
    assert [c["value"] for c in falls] == [pytest.approx(11.76, 0.01)]


def test_patience_needs_consecutive_passes(make_trial: Callable[..., Any]) -> None:
    """With patience 2 the second consecutive pass above the threshold (step 23) fires first;
    with patience 3 there are not enough passes (noise_aware=false: four passes cannot show
    their noise)."""
    assert fired(Overfit(make_trial(OVERFIT_LONG), patience="2", noise_aware="False")) == (23,)
    assert fired(Overfit(make_trial(OVERFIT_LONG), patience="3", noise_aware="False")) == ()


def test_ratio_threshold_is_respected(make_trial: Callable[..., Any]) -> None:
    """With ratio_threshold 2 only the last pass (ratio 2.67) fires (noise_aware=false)."""
    assert fired(Overfit(make_trial(OVERFIT), ratio_threshold="2", noise_aware="False")) == (17,)


def test_start_step_ignores_earlier_steps(make_trial: Callable[..., Any]) -> None:
    """Steps before start_step are neither compared nor used for the means: pass 16-17 is the
    first, the one at 22-23 fires."""
    assert fired(Overfit(make_trial(OVERFIT_LONG), start_step="12")) == (23,)


def test_tensor_regex_selects_the_compared_tensors(make_trial: Callable[..., Any]) -> None:
    """tensor_regex replaces the losses collection: a constant `acc` never fires."""
    assert fired(Overfit(make_trial(OVERFIT), tensor_regex="acc")) == ()


def test_without_a_losses_collection_every_scalar_is_compared(
    make_trial: Callable[..., Any],
) -> None:
    """A trial without a `losses` collection compares every scalar tensor (noise_aware=false)."""
    assert fired(Overfit(make_trial(OVERFIT_LONG, collections=[]), noise_aware="False")) == (18, 23)


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("start_step", "first"),
        ("start_step", "-1"),
        ("patience", "1.5"),
        ("patience", "0"),
        ("ratio_threshold", "tenth"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
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
    assert declared == {
        "tensor_regex": None,
        "start_step": "0",
        "patience": "1",
        "ratio_threshold": "0.1",
        "ignore_converged": "False",
        "noise_aware": "True",
    }


# ---------------------------------------------------------------------- Keras-like and real trials


def _run(rule: Any) -> tuple[int, ...]:
    return invoke_rule(rule, 0, raise_eval_cond=False).fired_steps


def _real(name: str) -> Any:
    return create_trial(str(hook_trial(name)))


def test_keras_like_healthy_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """Validation 8 % above training, running means and epoch-end duplicates: no fire."""
    rule = Overfit(keras_like("healthy"))
    assert _run(rule) == ()
    assert rule.evidence.comparisons > 0


def test_keras_like_overfit_run_fires_at_an_epoch_end_log(keras_like: Callable[..., Any]) -> None:
    """Training falls, validation rises: fires, judged from the (val_loss, loss) epoch-end pair."""
    trial = keras_like("overfit")
    rule = Overfit(trial)
    steps = _run(rule)
    assert steps
    assert all("val_loss" in trial.tensor_names(step=s) for s in steps)
    assert "epoch-end" in rule.evidence.summary()["reasons"][0]["quantity"]


def test_keras_like_flat_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """Learning rate 0 is not overfitting (validation 4 % below training)."""
    assert _run(Overfit(keras_like("flat"))) == ()


def test_epoch_end_training_mean_is_not_a_validation_value(tmp_path: Path) -> None:
    """An EVAL step with `val_loss` (no Keras pair used when val_loss is not scalar-readable
    aside) does not pull the training mean into the validation phase mean."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    writer.write_step(0, {"loss": np.float32(1.0)}, mode=TRAIN, mode_step=0)
    writer.write_step(1, {"loss": np.float32(1.2)}, mode=EVAL, mode_step=0)
    writer.write_step(2, {"loss": np.float32(1.0)}, mode=TRAIN, mode_step=1)
    with writer.step_writer(3) as w:
        w.write_tensor(np.float32(1.2), "loss", mode=EVAL, mode_step=1)
        w.write_tensor(np.float32(1.0), "loss", mode=EVAL, mode_step=1)  # training mean
        w.write_tensor(np.float32(1.2), "val_loss", mode=EVAL, mode_step=1)
    writer.end_training()
    with create_trial(str(tmp_path / "t")) as trial:
        rule = Overfit(trial)
        assert _run(rule) == (3,)
        ratios = [c["value"] for c in rule.evidence.summary()["reasons"]]
        assert ratios == pytest.approx([0.2])


def test_selection_hint_without_tensor_regex(make_trial: Callable[..., Any]) -> None:
    """The checked-nothing hint names the losses collection and says to save both modes."""
    rule = Overfit(make_trial([(TRAIN, [1.0])]))
    (hint,) = rule.selection_hints()
    assert "losses" in hint.description and "EVAL" in (hint.advice or "")


def test_real_keras_trials_with_default_parameters() -> None:
    """keras_flat_loss stays quiet; keras_overfit fires at its fifth epoch end (global step 19,
    ratio 0.13)."""
    for name in ("keras_flat_loss",):
        with _real(name) as trial:
            rule = Overfit(trial)
            assert _run(rule) == ()
            assert rule.evidence.comparisons > 0
    with _real("keras_overfit") as trial:
        assert _run(Overfit(trial))[0] == 19


def test_a_half_finished_validation_pass_is_not_judged(make_trial: Callable[..., Any]) -> None:
    """A pass whose first batch is far above the training mean is judged only when complete:
    the pass mean (1.2 + 0.8) / 2 = 1.0 is within 10 % of training, so nothing fires."""
    rule = Overfit(make_trial([(TRAIN, [1.0, 1.0]), (EVAL, [1.2, 0.8]), (TRAIN, [0.9])]))
    assert _run(rule) == ()
    (check,) = rule.evidence.summary()["closest"]
    assert check["step"] == 4 and check["mode"] == "TRAIN"
    assert check["value"] == pytest.approx(0.0, abs=1e-6)


def test_a_pass_cut_by_end_step_is_not_judged(make_trial: Callable[..., Any]) -> None:
    """When the evaluation stops (end_step) inside a validation pass, that pass is not judged."""
    phases = [(TRAIN, [1.0, 1.0]), (EVAL, [2.0, 2.0]), (TRAIN, [1.0, 1.0]), (EVAL, [2.0] * 3)]
    trial = make_trial(phases)
    result = invoke_rule(Overfit(trial), 0, end_step=7, raise_eval_cond=False)
    assert result.fired_steps == ()
    assert invoke_rule(Overfit(trial), 0, raise_eval_cond=False).fired_steps == (8,)


def test_real_pytorch_trials_with_default_parameters() -> None:
    """pytorch_healthy: each validation pass is judged once, the last one whole at the end
    (quiet); pytorch_overfit fires at the TRAIN step after a pass."""
    with _real("pytorch_healthy") as trial:
        rule = Overfit(trial)
        assert _run(rule) == ()
        labels = json.loads((hook_trial("pytorch_healthy") / "labels.json").read_text())
        passes = len(labels["evidence"]["per_epoch"])
        assert rule.evidence.comparisons == passes
    with _real("pytorch_overfit") as trial:
        rule = Overfit(trial)
        steps = _run(rule)
        assert steps and trial.mode(steps[0]) == TRAIN


def test_a_negative_loss_that_rises_is_not_still_falling(make_trial: Callable[..., Any]) -> None:
    """A negative loss (a log-likelihood, say) whose validation mean rises from -1.0 to -0.995
    has not fallen 1 % below its best: the second pass, 50 % above training, fires."""
    phases = [
        (TRAIN, [-2.0, -2.0]),
        (EVAL, [-1.0, -1.0]),
        (TRAIN, [-2.0, -2.0]),
        (EVAL, [-0.995, -0.995]),
        (TRAIN, [-2.0]),
    ]
    assert fired(Overfit(make_trial(phases))) == (8,)
