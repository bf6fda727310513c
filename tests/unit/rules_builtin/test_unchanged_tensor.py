"""UnchangedTensor: the 2019 vectors, the step window, tolerances, modes, selection and
parameter errors."""

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
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.unchanged_tensor import UnchangedTensor, unchanged_counts
from tests.support.keras_like import hook_trial

FIXTURES = Path(__file__).parents[2] / "fixtures" / "smdebug_1_0_34" / "data"
TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
COLLECTIONS = [
    Collection("weights", include_regex=["^weights/"]),
    Collection("losses", include_regex=["loss"]),
]

Modes = Mapping[int, tuple[ModeKeys, int]]  # global step -> (mode, mode step)


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def arrays(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def fired(
    rule: UnchangedTensor, start_step: int = 0, end_step: int | None = None
) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, end_step, raise_eval_cond=False).fired_steps


def sequence(values: list[float], name: str = "weights/w") -> dict[int, dict[str, object]]:
    """One tensor whose value at step i is ``[values[i], 1]``."""
    return {i: {name: arrays(v, 1)} for i, v in enumerate(values)}


@pytest.fixture
def vector_2019(make_trial: Callable[..., Any]) -> Any:
    """The 2019 trial: foo_1/foo_2 equal at steps 0, 1, 2; boo_1/boo_2 saved at step 5 only."""
    foo = {"foo_1": arrays(1, 2, 3), "foo_2": np.ones((2, 2), np.float32)}
    steps: dict[int, dict[str, object]] = {s: dict(foo) for s in range(3)}
    steps[5] = {"boo_1": arrays(4, 5), "boo_2": arrays(6)}
    return make_trial(steps)


def test_registered() -> None:
    """The registry finds UnchangedTensor by name, any case."""
    assert registry.lookup("unchangedtensor") is UnchangedTensor


@pytest.mark.parametrize(
    ("start", "end", "expected"), [(0, 2, ()), (0, 3, (2,)), (2, 3, (2,)), (3, 6, ())]
)
def test_2019_vectors(vector_2019: Any, start: int, end: int, expected: tuple[int, ...]) -> None:
    """2019 vectors: [0,2) has two equal steps only, [0,3) and [2,3) fire at step 2 (the steps
    before the window count), [3,6) sees boo_* once only."""
    rule = UnchangedTensor(vector_2019, tensor_regex="foo_.*,boo_.*")
    assert fired(rule, start, end) == expected


def test_one_rule_invoked_over_the_2019_windows_in_turn(vector_2019: Any) -> None:
    """Reusing one rule object for the four windows gives the same answers: going back to an
    earlier step starts the bookkeeping afresh."""
    rule = UnchangedTensor(vector_2019, tensor_regex="foo_.*,boo_.*")
    answers = [fired(rule, start, end) for start, end in ((0, 2), (0, 3), (2, 3), (3, 6))]
    assert answers == [(), (2,), (2,), ()]


def test_fires_while_the_value_stays_the_same(make_trial: Callable[..., Any]) -> None:
    """Values a, b, b, b, c, c, c, d: fires at the third equal step of each run."""
    trial = make_trial(sequence([1, 2, 2, 2, 3, 3, 3, 4]))
    assert fired(UnchangedTensor(trial)) == (3, 6)


def test_num_steps(make_trial: Callable[..., Any]) -> None:
    """With num_steps 2, two equal saved steps are enough; with 4, the runs of three are not."""
    trial = make_trial(sequence([1, 2, 2, 2, 3, 3, 3, 4]))
    assert fired(UnchangedTensor(trial, num_steps="2")) == (2, 3, 5, 6)
    assert fired(UnchangedTensor(trial, num_steps="4")) == ()


def test_saved_steps_need_not_be_consecutive(make_trial: Callable[..., Any]) -> None:
    """A tensor saved every 10 steps is compared at 0, 10, 20: it fires at 20."""
    steps: dict[int, dict[str, object]] = {s: {"loss": arrays(s)} for s in range(25)}
    for s in (0, 10, 20):
        steps[s]["weights/w"] = arrays(7, 7)
    assert fired(UnchangedTensor(make_trial(steps), collection_names="weights")) == (20,)


def test_tolerances(make_trial: Callable[..., Any]) -> None:
    """Changes of one part in a million are unchanged with the default tolerances, changed
    with rtol 0 and atol 0."""
    trial = make_trial(sequence([1.0, 1.000001, 1.000002]))
    assert fired(UnchangedTensor(trial, tensor_regex=".")) == (2,)
    assert fired(UnchangedTensor(trial, rtol="0", atol="0")) == ()
    assert fired(UnchangedTensor(trial, rtol="0", atol="1e-5")) == (2,)


def test_equal_nan(make_trial: Callable[..., Any]) -> None:
    """A constant tensor holding NaN is unchanged only with equal_nan."""
    trial = make_trial(sequence([float("nan")] * 3))
    assert fired(UnchangedTensor(trial)) == ()
    assert fired(UnchangedTensor(trial, equal_nan="true")) == (2,)


def test_steps_are_counted_within_a_mode(make_trial: Callable[..., Any]) -> None:
    """TRAIN steps 0, 1 and 4 with an EVAL pass (2, 3) between: the constant TRAIN loss fires
    at 4; weights equal over EVAL 2, 3 and TRAIN 4 do not fire (two EVAL steps only)."""
    modes = {0: (TRAIN, 0), 1: (TRAIN, 1), 2: (EVAL, 0), 3: (EVAL, 1), 4: (TRAIN, 2)}
    weights = [arrays(1), arrays(2), arrays(3), arrays(3), arrays(3)]
    losses = [0.5, 0.5, 0.9, 0.8, 0.5]
    trial = make_trial(
        {s: {"weights/w": weights[s], "loss": arrays(losses[s])} for s in range(5)}, modes=modes
    )
    assert fired(UnchangedTensor(trial, collection_names="losses")) == (4,)
    assert fired(UnchangedTensor(trial, collection_names="weights")) == ()


def test_shapes_must_match(make_trial: Callable[..., Any]) -> None:
    """Zeros of shape (1,) then (3,) are not the same value, though numpy would broadcast."""
    trial = make_trial(
        {
            0: {"weights/w": arrays(0)},
            1: {"weights/w": arrays(0, 0, 0)},
            2: {"weights/w": arrays(0, 0, 0)},
            3: {"weights/w": arrays(0, 0, 0)},
        }
    )
    assert fired(UnchangedTensor(trial)) == (3,)


def test_integer_and_bool_tensors(make_trial: Callable[..., Any]) -> None:
    """Integer tensors compare by value and boolean ones exactly."""
    steps = {
        s: {"labels": np.array([1, 2], np.uint8), "mask": np.array([True, s > 5])} for s in range(3)
    }
    trial = make_trial(steps)
    assert fired(UnchangedTensor(trial, tensor_regex="labels")) == (2,)
    assert fired(UnchangedTensor(trial, tensor_regex="mask")) == (2,)


def test_shape_only_tensors_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """A tensor saved as a shape only has no value to compare."""
    shapes = {s: {"weights/w": (2, 2)} for s in range(4)}
    trial = make_trial({s: {"loss": arrays(s)} for s in range(4)}, shapes=shapes)
    assert fired(UnchangedTensor(trial, collection_names="weights")) == ()


def test_selection(make_trial: Callable[..., Any]) -> None:
    """Only the selected tensors count; with no selection, only the weights, biases,
    gradients and losses collections (none here)."""
    steps = {s: {"weights/w": arrays(s), "other/x": arrays(1)} for s in range(3)}
    trial = make_trial(steps)
    assert fired(UnchangedTensor(trial, collection_names="weights")) == ()
    assert fired(UnchangedTensor(trial, tensor_regex="^other/")) == (2,)
    assert fired(UnchangedTensor(trial)) == ()


def test_row_comparison_answers_as_numpy_allclose() -> None:
    """The rule's comparison of stacked values gives numpy.allclose's answer for each pair,
    with NaN, inf, overflowing float16 and integers, for every tolerance setting."""
    rng = np.random.default_rng(3)
    specials = [0.0, np.nan, np.inf, -np.inf, 1.0, 1.0 + 1e-6, 65000.0, -65000.0]
    for _ in range(500):
        dtype = rng.choice([np.float16, np.float32, np.float64, np.int32, np.uint8])
        a = rng.choice(specials, 3) if rng.random() < 0.5 else rng.normal(size=3)
        b = a.copy()
        b[rng.integers(0, 3)] = rng.choice(specials) if rng.random() < 0.5 else b[0] + 1e-7
        if np.issubdtype(dtype, np.integer):
            a, b = (np.nan_to_num(v, posinf=5, neginf=0).clip(0, 100) for v in (a, b))
        with np.errstate(all="ignore"):
            x, y = a.astype(dtype), b.astype(dtype)
            for rtol, atol, equal_nan in ((1e-5, 1e-8, False), (0, 0, True), (0, 1.0, False)):
                expected = bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))
                counts = unchanged_counts(np.stack([y, x]), 1, rtol, atol, equal_nan)
                assert list(counts) == [1, 1 + expected], (x, y, rtol, atol)


def test_counts_stop_at_the_first_changed_earlier_value() -> None:
    """Each row counts the rows just before it that hold its value, the nearest first, up to
    ``back`` of them; text compares exactly."""
    rows = np.array([[1.0], [2.0], [2.0], [2.0], [2.0], [1.0]])
    assert list(unchanged_counts(rows, 3, 0, 0, False)) == [1, 1, 2, 3, 4, 1]
    assert list(unchanged_counts(rows, 1, 0, 0, False)) == [1, 1, 2, 2, 2, 1]
    words = np.array([["a", "b"], ["a", "b"], ["a", "c"]])
    assert list(unchanged_counts(words, 2, 0, 0, False)) == [1, 2, 1]


def test_vanishing_fixture_matches_smdebug() -> None:
    """On smdebug's vanishing trial, weights stop changing and it fires at steps 10 to 15, as
    the reference run of the documented rule."""
    with create_trial(str(FIXTURES / "vanishing")) as trial:
        assert fired(UnchangedTensor(trial, tensor_regex=".*")) == tuple(range(10, 16))


def test_loss_flat_fixture_counts_steps_within_a_mode() -> None:
    """On smdebug's loss_flat trial (5 TRAIN, 2 EVAL, repeated; TRAIN loss flat from TRAIN
    step 10), it fires at the TRAIN steps with three flat losses (16-18, 21-25), not at the
    TRAIN steps right after an EVAL pass that the reference run (global steps) fired at."""
    with create_trial(str(FIXTURES / "loss_flat")) as trial:
        assert fired(UnchangedTensor(trial, tensor_regex=".*")) == (16, 17, 18, 21, 22, 23, 24, 25)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("num_steps", "three", "a whole number"),
        ("num_steps", "1", "a whole number >= 2"),
        ("rtol", "tight", "a number"),
        ("rtol", "-1", "a number >= 0"),
        ("atol", "1e-x", "a number"),
        ("atol", "-0.1", "a number >= 0"),
        ("equal_nan", "sometimes", "true or false"),
    ],
)
def test_parameter_errors(
    make_trial: Callable[..., Any], name: str, value: str, expected: str
) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial(sequence([1]))
    message = f"UnchangedTensor parameter {name} must be {expected}, got {value!r}"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        UnchangedTensor(trial, **{name: value})


def test_invalid_tensor_regex(make_trial: Callable[..., Any]) -> None:
    """A bad tensor_regex is a ConfigurationError naming the rule, parameter and regex."""
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "UnchangedTensor parameter tensor_regex has an invalid regular expression '*'"
        ),
    ):
        UnchangedTensor(make_trial(sequence([1])), tensor_regex="*")


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in UnchangedTensor.PARAMETERS]
    assert declared == [
        ("collection_names", None),
        ("tensor_regex", None),
        ("num_steps", "3"),
        ("rtol", "1e-05"),
        ("atol", "1e-08"),
        ("equal_nan", "False"),
    ]


# ---------------------------------------------------------------------- Keras-like and real trials


def _run(rule: Any) -> tuple[int, ...]:
    return invoke_rule(rule, 0, raise_eval_cond=False).fired_steps


def _real(name: str) -> Any:
    return create_trial(str(hook_trial(name)))


def test_keras_like_healthy_run_is_quiet(keras_like: Callable[..., Any]) -> None:
    """Weights saved at three EVAL steps of a validation pass with the same values, and the
    epoch-end duplicate `loss`, do not fire: only TRAIN steps are checked."""
    rule = UnchangedTensor(keras_like("healthy"))
    assert _run(rule) == ()
    summary = rule.evidence.summary()
    assert summary["comparisons"] > 0
    assert {c["mode"] for c in summary["closest"]} == {"TRAIN"}


def test_keras_like_flat_run_fires(keras_like: Callable[..., Any]) -> None:
    """Learning rate 0: the loss and the weights stay the same over 3 saved TRAIN steps."""
    rule = UnchangedTensor(keras_like("flat"))
    assert _run(rule)[0] == 2
    reason = rule.evidence.summary()["reasons"][0]
    assert reason["parameter"] == "num_steps" and reason["value"] == 3


def test_eval_steps_are_not_checked(make_trial: Callable[..., Any]) -> None:
    """A tensor constant over EVAL steps only does not fire, and is not a comparison."""
    modes = {0: (EVAL, 0), 1: (EVAL, 1), 2: (EVAL, 2)}
    rule = UnchangedTensor(make_trial({s: {"w": np.ones(2)} for s in range(3)}, modes=modes))
    assert fired(rule) == ()
    assert rule.evidence.comparisons == 0
    assert "TRAIN" in (rule.selection_hints()[0].advice or "")


def test_real_keras_trials_with_default_parameters() -> None:
    """keras_healthy stays quiet; keras_flat_loss fires at TRAIN step 2 (global step 4)."""
    with _real("keras_healthy") as trial:
        rule = UnchangedTensor(trial)
        assert _run(rule) == ()
        assert rule.evidence.comparisons > 0
    with _real("keras_flat_loss") as trial:
        assert _run(UnchangedTensor(trial))[0] == 4


def test_default_selection_is_the_tensors_that_must_change(tmp_path: Path) -> None:
    """Without a selection, a constant hyperparameter and batch index are not checked; a
    constant loss (losses collection, by include_regex) and weight (by tensor name) are."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections(
        [
            Collection("losses", include_regex=["loss"]),
            Collection("weights", tensor_names={"w"}),
            Collection("hyperparameters", include_regex=["^hyper"]),
        ]
    )
    for step in range(3):
        writer.write_step(
            step,
            {
                "train-loss": arrays(0.5 - 0.1 * step),
                "w": arrays(1.0),
                "hyperparameters/eta": arrays(0.3),
                "batch": arrays(1.0),
            },
        )
    writer.end_training()
    with create_trial(str(tmp_path / "t")) as trial:
        rule = UnchangedTensor(trial)
        assert fired(rule) == (2,)
        assert {r["tensors"][0] for r in rule.evidence.summary()["reasons"]} == {"w"}
        (hint,) = rule.selection_hints()
        assert "weights, biases, gradients, losses" in hint.description
