"""WeightUpdateRatio: the ratio formula, which earlier step is compared, num_steps, training
steps only, missing data and parameter errors."""

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
from evaluator.testing import compute_reductions
from evaluator.trial import create_trial
from evaluator.trial.trial import Trial
from rules_builtin import registry, weight_update_ratio
from rules_builtin.weight_update_ratio import (
    WeightUpdateRatio,
    _as_float64,
    _norm,
    _window_rows,
)
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


def _arrays(rng: np.random.Generator) -> list[np.ndarray]:
    """float64 arrays of several sizes and layouts, with zeros, -0.0, huge (overflowing),
    tiny, inf and NaN elements."""
    arrays = []
    for size in (1, 2, 3, 15, 16, 17, 31, 64, 255, 256, 257, 1000, 4099):
        arrays.append(rng.standard_normal(size) * 10.0 ** rng.integers(-30, 30))
    special = rng.standard_normal(300)
    special[[3, 50, 299]] = [np.inf, -0.0, 1e300]
    arrays += [special, np.full(40, 1e200), np.zeros(7), np.full(5, -0.0), np.full(9, 1e-300)]
    with_nan = rng.standard_normal(100)
    with_nan[17] = np.nan
    arrays += [with_nan, np.array([np.inf, -np.inf]), np.empty(0)]
    matrix = rng.standard_normal((13, 7))
    arrays += [matrix, matrix.T, matrix[:, ::2], matrix[::-1]]  # not C-contiguous
    return arrays


def test_fast_norm_is_numpys_norm_bit_for_bit() -> None:
    """_norm gives float(np.linalg.norm(a.ravel())) exactly, warnings silenced as before."""
    for array in _arrays(np.random.default_rng(5)):
        with np.errstate(over="ignore", invalid="ignore"):
            expected = float(np.linalg.norm(array.ravel()))
        with np.errstate(all="raise", under="ignore"):
            got = _norm(array)
        assert type(got) is float
        assert got == expected or (np.isnan(got) and np.isnan(expected)), array


@pytest.mark.parametrize("chunk_bytes", [None, 1, 3 * 8 * 91])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256,), (7, 13), (1,), (3, 2, 5), (4099,)])
def test_window_rows_equal_the_per_step_norms(
    monkeypatch: pytest.MonkeyPatch, chunk_bytes: int | None, dtype: Any, shape: tuple[int, ...]
) -> None:
    """Over a window, each row's value, norm and update norm are those the per-step path
    computes from the step's value and the previous one, bit for bit (inf and NaN too),
    however many rows are subtracted at a time."""
    if chunk_bytes is not None:
        monkeypatch.setattr(weight_update_ratio, "_UPDATE_BYTES", chunk_bytes)
    rng = np.random.default_rng(7)
    steps = [(rng.standard_normal(shape) * 10.0 ** rng.integers(-20, 20)) for _ in range(9)]
    steps[4].flat[0] = np.inf
    steps[5].flat[-1] = np.nan
    steps[6] = steps[5].copy()
    stacked = np.stack(steps).astype(dtype)
    with np.errstate(all="raise", under="ignore"):
        rows = _window_rows(stacked)
    assert len(rows) == len(steps)
    for i, (value, norm, prior, update) in enumerate(rows):
        alone = _as_float64(stacked[i].copy())
        assert alone is not None
        assert value.shape == alone.shape and value.dtype == np.float64
        assert np.array_equal(value, alone, equal_nan=True)
        assert norm == _norm(alone) or (np.isnan(norm) and np.isnan(_norm(alone)))
        if i == 0:
            assert prior is None and update is None
            continue
        assert prior is rows[i - 1][0] and update is not None
        with np.errstate(over="ignore", invalid="ignore"):
            expected = float(np.linalg.norm((alone - _as_float64(stacked[i - 1].copy())).ravel()))
        assert update == expected or (np.isnan(update) and np.isnan(expected))


@pytest.mark.parametrize("num_steps", [None, "3"])
def test_windows_give_the_evidence_of_the_per_step_path(
    make_trial: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, num_steps: str | None
) -> None:
    """The rule over windows (norms computed per window) and step by step (each step's value
    alone, as on smdebug's trial without a batch read) records the same comparisons, series
    and firings, integer and empty weights (steps alone in both runs) included."""
    rng = np.random.default_rng(3)
    values = {}
    for s in range(12):
        w = (rng.standard_normal(50) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
        if s == 5:
            w[0] = np.inf
        if s == 8:
            w[1] = np.nan
        values[s] = {
            "weights/a": w,
            "weights/b": np.full((3, 4), s % 3, np.float32),
            "weights/i": np.arange(6, dtype=np.int32) * (s % 4),
            "weights/empty": np.zeros((0, 2), np.float32),
        }
    values[10]["weights/b"] = values[9]["weights/b"]  # unchanged: fires as too small

    def run() -> tuple[tuple[int, ...], dict[str, Any], dict[str, Any]]:
        rule = WeightUpdateRatio(make_trial(values), num_steps=num_steps, large_threshold="2")
        steps = fired(rule)
        return steps, rule.evidence.summary(), rule.evidence.series()

    windows: list[int] = []

    def counted(stacked: np.ndarray) -> list[Any]:
        windows.append(len(stacked))
        return _window_rows(stacked)

    monkeypatch.setattr(weight_update_ratio, "_window_rows", counted)
    windowed = run()
    assert windows  # the norms came from windows
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    step_by_step = run()
    assert windowed[0] and json.dumps(windowed) == json.dumps(step_by_step)
