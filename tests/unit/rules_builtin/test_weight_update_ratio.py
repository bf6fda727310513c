"""WeightUpdateRatio: the ratio formula, which earlier step is compared, num_steps, training
steps only, missing data and parameter errors."""

from __future__ import annotations

import functools
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
from evaluator.testing import compute_reductions
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.weight_update_ratio import WeightUpdateRatio
from tests.support.keras_like import hook_trial

FIXTURES = Path(__file__).parents[2] / "fixtures" / "smdebug_1_0_34" / "data"
TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
WEIGHTS = [Collection("weights", include_regex=["^weights/"])]

Modes = Mapping[int, tuple[ModeKeys, int]]  # global step -> (mode, mode step)


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=WEIGHTS)


def linear(step: int) -> np.ndarray:
    """Weights growing 10% of the first value per step: [1 + 0.1 s] * 4 (norm 2 (1 + 0.1 s))."""
    return np.full(4, 1 + 0.1 * step, np.float32)


def fired(rule: WeightUpdateRatio, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds WeightUpdateRatio by name, any case."""
    assert registry.lookup("weightupdateratio") is WeightUpdateRatio


def test_normal_updates_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Updates of about 10% of the weights stay between the default thresholds."""
    trial = make_trial({s: {"weights/w": linear(s)} for s in range(6)})
    assert fired(WeightUpdateRatio(trial)) == ()


def test_large_update_fires_at_its_step(make_trial: Callable[..., Any]) -> None:
    """A jump from 1.2 to 100 at step 3 (ratio about 82 > 10) fires at step 3 only."""
    values = [linear(s) for s in range(3)] + [np.full(4, v, np.float32) for v in (100, 101, 102)]
    trial = make_trial({s: {"weights/w": v} for s, v in enumerate(values)})
    assert fired(WeightUpdateRatio(trial)) == (3,)


def test_no_update_fires_as_too_small(make_trial: Callable[..., Any]) -> None:
    """Weights identical at steps 2 and 3 (ratio 0 < 1e-8) fire at step 3."""
    values = [linear(s) for s in range(5)]
    values[3] = values[2]
    trial = make_trial({s: {"weights/w": v} for s, v in enumerate(values)})
    assert fired(WeightUpdateRatio(trial)) == (3,)


def test_ratio_formula_and_thresholds(make_trial: Callable[..., Any]) -> None:
    """ratio = ||w(s) - w(p)|| / (||w(p)|| + epsilon): 0.1 / 1.1 at step 2, so thresholds just
    around it decide."""
    trial = make_trial({s: {"weights/w": linear(s)} for s in range(3)})
    ratio = 0.1 / 1.1
    assert fired(WeightUpdateRatio(trial, large_threshold=str(ratio * 0.99))) == (1, 2)
    assert fired(WeightUpdateRatio(trial, large_threshold=str(ratio * 1.01))) == (1,)
    assert fired(WeightUpdateRatio(trial, small_threshold=str(ratio * 1.01))) == (2,)


def test_epsilon_keeps_zero_weights_finite(make_trial: Callable[..., Any]) -> None:
    """Zero weights then an update of 0.001: 0.002 / epsilon is huge and fires; with epsilon
    1 the ratio is 0.002 and does not."""
    trial = make_trial(
        {0: {"weights/w": np.zeros(4, np.float32)}, 1: {"weights/w": np.full(4, 0.001, np.float32)}}
    )
    assert fired(WeightUpdateRatio(trial)) == (1,)
    assert fired(WeightUpdateRatio(trial, epsilon="1")) == ()


def test_compares_with_the_previous_saved_step(make_trial: Callable[..., Any]) -> None:
    """Weights saved every 5 steps (other steps hold only a loss) are compared 5 steps apart."""
    steps: dict[int, dict[str, object]] = {s: {"loss": np.float32(s)} for s in range(16)}
    for s, v in ((0, 1.0), (5, 1.1), (10, 1.1), (15, 1.2)):
        steps[s]["weights/w"] = np.full(4, v, np.float32)
    assert fired(WeightUpdateRatio(make_trial(steps))) == (10,)  # 10 equals 5


def test_num_steps_compares_with_the_oldest_step_in_the_window(
    make_trial: Callable[..., Any],
) -> None:
    """With num_steps 3, step s is compared with s-3: ratios 0.1, 0.2, 0.3, 0.3/1.1, 0.3/1.2 at
    steps 1-5, so large_threshold 0.26 fires at 3 and 4; without num_steps nothing fires."""
    trial = make_trial({s: {"weights/w": linear(s)} for s in range(6)})
    assert fired(WeightUpdateRatio(trial, num_steps="3", large_threshold="0.26")) == (3, 4)
    assert fired(WeightUpdateRatio(trial, large_threshold="0.26")) == ()


def test_num_steps_window_without_a_saved_step(make_trial: Callable[..., Any]) -> None:
    """Weights saved every 5 steps and num_steps 3: no saved step in the window, no comparison."""
    steps: dict[int, dict[str, object]] = {s: {"loss": np.float32(s)} for s in range(11)}
    for s in (0, 5, 10):
        steps[s]["weights/w"] = np.ones(4, np.float32)  # unchanged: would fire if compared
    trial = make_trial(steps)
    assert fired(WeightUpdateRatio(trial, num_steps="3")) == ()
    assert fired(WeightUpdateRatio(trial, num_steps="5")) == (5, 10)


def test_eval_steps_are_not_evaluated(make_trial: Callable[..., Any]) -> None:
    """TRAIN 0-2, EVAL 3-4 (weights unchanged), TRAIN 5-6: EVAL steps never fire, and TRAIN
    step 5 is compared with TRAIN step 2."""
    modes = {
        0: (TRAIN, 0),
        1: (TRAIN, 1),
        2: (TRAIN, 2),
        3: (EVAL, 0),
        4: (EVAL, 1),
        5: (TRAIN, 3),
        6: (TRAIN, 4),
    }
    values = {
        0: linear(0),
        1: linear(1),
        2: linear(2),
        3: linear(3),
        4: linear(3),
        5: linear(3),
        6: linear(4),
    }
    trial = make_trial({s: {"weights/w": v} for s, v in values.items()}, modes=modes)
    assert fired(WeightUpdateRatio(trial)) == ()
    # TRAIN step 5 equal to TRAIN step 2 fires (it is compared with 2, not with EVAL 4).
    values[5] = linear(2)
    trial = make_trial({s: {"weights/w": v} for s, v in values.items()}, modes=modes)
    assert fired(WeightUpdateRatio(trial)) == (5,)


def test_weights_without_values_are_not_compared(make_trial: Callable[..., Any]) -> None:
    """Reductions-only and shape-only weights, and a weight whose shape changes, never fire."""
    reductions = {s: {"weights/r": compute_reductions(np.ones(4), ["l2"])} for s in range(3)}
    shapes = {s: {"weights/s": (4,)} for s in range(3)}
    steps = {s: {"weights/grows": np.ones(s + 1, np.float32)} for s in range(3)}
    trial = make_trial(steps, reductions=reductions, shapes=shapes)
    assert fired(WeightUpdateRatio(trial)) == ()


def test_only_the_weights_collection(make_trial: Callable[..., Any]) -> None:
    """An unchanged tensor outside the weights collection does not fire."""
    steps = {s: {"weights/w": linear(s), "biases/b": np.ones(2, np.float32)} for s in range(4)}
    assert fired(WeightUpdateRatio(make_trial(steps))) == ()


def test_no_weights_collection_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A trial without a weights collection never fires and records no comparison, so the
    evaluator ends the run with its checked-nothing error instead of NoIssuesFound."""
    trial = make_trial(
        {s: {"w": np.ones(2, np.float32)} for s in range(3)},
        collections=[Collection("other", include_regex=["w"])],
    )
    rule = WeightUpdateRatio(trial)
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything(reads_count=False)


def test_reinvoking_from_an_earlier_step(make_trial: Callable[..., Any]) -> None:
    """Invoking the same rule again from step 0, then from step 3, gives the same answers as
    fresh rules: the step before the start is found in the trial."""
    values = [linear(s) for s in range(6)]
    values[4] = values[3]
    rule = WeightUpdateRatio(make_trial({s: {"weights/w": v} for s, v in enumerate(values)}))
    assert fired(rule) == (4,)
    assert fired(rule) == (4,)
    assert fired(rule, start_step=4) == (4,)


def test_vanishing_fixture_matches_smdebug() -> None:
    """On smdebug's vanishing trial (TRAIN, saved every step) it fires at steps 9 to 15, as
    the reference run of the documented rule."""
    with create_trial(str(FIXTURES / "vanishing")) as trial:
        assert fired(WeightUpdateRatio(trial)) == tuple(range(9, 16))


def test_loss_flat_fixture_ignores_eval_passes() -> None:
    """On smdebug's loss_flat trial (5 TRAIN, 2 EVAL, repeated) it does not fire: the reference
    run, comparing global steps s-1 and s, fired at the EVAL passes only."""
    with create_trial(str(FIXTURES / "loss_flat")) as trial:
        assert fired(WeightUpdateRatio(trial)) == ()


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("num_steps", "few", "a whole number"),
        ("num_steps", "0", "a whole number >= 1"),
        ("num_steps", "2.5", "a whole number"),
        ("large_threshold", "ten", "a number"),
        ("small_threshold", "tiny", "a number"),
        ("epsilon", "eps", "a number"),
    ],
)
def test_parameter_errors(
    make_trial: Callable[..., Any], name: str, value: str, expected: str
) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial({0: {"weights/w": linear(0)}})
    message = f"WeightUpdateRatio parameter {name} must be {expected}, got {value!r}"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        WeightUpdateRatio(trial, **{name: value})


def test_num_steps_none_means_the_previous_step(make_trial: Callable[..., Any]) -> None:
    """num_steps given as "None" or "" (as a template might send it) is the default."""
    trial = make_trial({0: {"weights/w": linear(0)}})
    assert WeightUpdateRatio(trial, num_steps="None").num_steps is None
    assert WeightUpdateRatio(trial, num_steps="").num_steps is None


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in WeightUpdateRatio.PARAMETERS]
    assert declared == [
        ("num_steps", None),
        ("large_threshold", "10.0"),
        ("small_threshold", "0.00000001"),
        ("epsilon", "0.000000001"),
    ]


# ---------------------------------------------------------------------- Keras-like and real trials


def _run(rule: Any) -> tuple[int, ...]:
    return invoke_rule(rule, 0, raise_eval_cond=False).fired_steps


def _real(name: str) -> Any:
    return create_trial(str(hook_trial(name)))


def test_keras_like_healthy_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """Weights saved at EVAL steps with unchanged values never give a ratio of 0."""
    rule = WeightUpdateRatio(keras_like("healthy"))
    assert _run(rule) == ()
    summary = rule.evidence.summary()
    assert summary["comparisons"] > 0
    assert {c["mode"] for c in summary["closest"]} == {"TRAIN"}


def test_keras_like_flat_run_fires(keras_like: Callable[..., Any]) -> None:
    """Learning rate 0: the weights do not change between TRAIN steps."""
    rule = WeightUpdateRatio(keras_like("flat"))
    assert _run(rule)[0] == 1
    assert rule.evidence.summary()["reasons"][0]["parameter"] == "small_threshold"


def test_records_both_thresholds_per_compared_weight(keras_like: Callable[..., Any]) -> None:
    """Each comparison is recorded against large_threshold and small_threshold."""
    rule = WeightUpdateRatio(keras_like("healthy", epochs=1, train_batches=3, val_batches=2))
    _run(rule)
    summary = rule.evidence.summary()
    assert summary["comparisons"] == 4  # TRAIN steps 1 and 2, two conditions each
    assert {c["parameter"] for c in summary["closest"]} == {"large_threshold", "small_threshold"}


def test_selection_hint_has_no_parameter(make_trial: Callable[..., Any]) -> None:
    """WeightUpdateRatio has no selection parameter: the hint gives advice instead."""
    (hint,) = WeightUpdateRatio(make_trial({0: {}})).selection_hints()
    assert hint.parameter is None and "weights" in (hint.advice or "")


def test_real_keras_trials_with_default_parameters() -> None:
    """keras_healthy stays quiet; keras_flat_loss fires at TRAIN step 3 (global step 6)."""
    with _real("keras_healthy") as trial:
        rule = WeightUpdateRatio(trial)
        assert _run(rule) == ()
        assert rule.evidence.comparisons > 0
    with _real("keras_flat_loss") as trial:
        assert _run(WeightUpdateRatio(trial))[0] == 6
