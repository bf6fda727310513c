"""ExplodingTensor: the 2019 vectors, NaN versus inf, selection, reductions-only tensors and
parameter errors."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError, RuleEvaluationConditionMet
from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.testing import compute_reductions
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.exploding_tensor import ExplodingTensor

FIXTURES = Path(__file__).parents[2] / "fixtures" / "smdebug_1_0_34" / "data"
COLLECTIONS = [
    Collection("weights", include_regex=["^weights/"]),
    Collection("gradients", include_regex=["^gradients/"]),
]
NAN, INF = float("nan"), float("inf")


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def arrays(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def healthy(step: int) -> dict[str, object]:
    return {"weights/w": arrays(1, 2, step), "gradients/w": arrays(0.1, -0.2, 0.3)}


def fired(rule: ExplodingTensor, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds ExplodingTensor by name, any case."""
    assert registry.lookup("explodingtensor") is ExplodingTensor


def test_2019_vector_nan_at_steps_0_and_2(make_trial: Callable[..., Any]) -> None:
    """2019 vector: NaN in a gradient at steps 0 and 2, with gradients,weights selected, fires
    at exactly those steps."""
    steps = {s: healthy(s) for s in range(4)}
    steps[0]["gradients/w"] = arrays(0.1, NAN, 0.3)
    steps[2]["gradients/w"] = arrays(NAN, NAN, NAN)
    rule = ExplodingTensor(make_trial(steps), collection_names="gradients,weights")
    assert fired(rule) == (0, 2)


def test_2019_two_invocations_fire_once_each(make_trial: Callable[..., Any]) -> None:
    """2019 vector: invoking from start_step 0 and then from 1 (raising) fires at 0, then at 2."""
    steps = {s: healthy(s) for s in range(4)}
    steps[0]["gradients/w"] = arrays(NAN, 1, 1)
    steps[2]["weights/w"] = arrays(1, NAN, 1)
    rule = ExplodingTensor(make_trial(steps), collection_names="gradients,weights")
    with pytest.raises(RuleEvaluationConditionMet) as first:
        invoke_rule(rule, start_step=0, raise_eval_cond=True)
    with pytest.raises(RuleEvaluationConditionMet) as second:
        invoke_rule(rule, start_step=1, raise_eval_cond=True)
    assert (first.value.step, second.value.step) == (0, 2)


def test_healthy_trial_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Finite values everywhere: the rule never fires."""
    assert fired(ExplodingTensor(make_trial({s: healthy(s) for s in range(5)}))) == ()


def test_inf_fires_unless_only_nan(make_trial: Callable[..., Any]) -> None:
    """-inf at step 1 fires by default and not with only_nan; NaN at step 3 fires with both."""
    steps = {s: healthy(s) for s in range(5)}
    steps[1]["weights/w"] = arrays(1, -INF, 1)
    steps[3]["gradients/w"] = arrays(NAN, 1, 1)
    trial = make_trial(steps)
    assert fired(ExplodingTensor(trial)) == (1, 3)
    assert fired(ExplodingTensor(trial, only_nan="True")) == (3,)


def test_selection_by_collection_and_regex(make_trial: Callable[..., Any]) -> None:
    """A NaN outside the selected collections is ignored; a regex or no selection finds it."""
    steps = {s: {**healthy(s), "other/x": arrays(1, 1)} for s in range(3)}
    steps[1]["other/x"] = arrays(NAN, 1)
    trial = make_trial(steps)
    assert fired(ExplodingTensor(trial, collection_names="weights,gradients")) == ()
    assert fired(ExplodingTensor(trial, collection_names="weights", tensor_regex="^other/")) == (1,)
    assert fired(ExplodingTensor(trial)) == (1,)  # neither given: all tensors


def test_integer_and_shape_only_tensors_are_skipped(make_trial: Callable[..., Any]) -> None:
    """Integer tensors cannot be non-finite and shape-only tensors have no value: no fire."""
    steps = {s: {"labels": np.array([1, 2, 3], np.int64)} for s in range(2)}
    shapes = {s: {"weights/w": (2, 2)} for s in range(2)}
    assert fired(ExplodingTensor(make_trial(steps, shapes=shapes))) == ()


def test_reductions_only_tensors_are_judged_by_their_reductions(
    make_trial: Callable[..., Any],
) -> None:
    """A reductions-only gradient with a NaN mean fires; one with only an infinite max fires
    by default but not with only_nan."""

    def saved(*values: float) -> dict[str, Any]:
        return {"gradients/w": compute_reductions(arrays(*values), ["mean", "max"])}

    reductions = {0: saved(1, 2), 1: saved(1, NAN), 2: saved(1, INF)}
    trial = make_trial({s: {} for s in range(3)}, reductions=reductions)
    assert fired(ExplodingTensor(trial)) == (1, 2)
    assert fired(ExplodingTensor(trial, only_nan="true")) == (1,)


def test_firing_reason_names_tensor_count_and_limit(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the tensor, its count of NaN/inf elements and the fixed limit 0."""
    steps = {s: healthy(s) for s in range(3)}
    steps[2]["gradients/w"] = arrays(NAN, INF, 1)
    rule = ExplodingTensor(make_trial(steps))
    assert fired(rule) == (2,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (2, ["gradients/w"])
    assert (reason["quantity"], reason["value"]) == ("NaN or infinite elements", 2)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "non-finite elements allowed",
        0,
        ">",
    )
    assert (
        "gradients/w holds 2 NaN or infinite elements (1 NaN, 1 inf) at step 2"
        in reason["sentence"]
    )


def test_skipped_tensors_are_not_counted_as_checked(make_trial: Callable[..., Any]) -> None:
    """Integer and shape-only tensors are not checked, so nothing is recorded as checked."""
    steps = {s: {"labels": np.array([1, 2, 3], np.int64)} for s in range(2)}
    shapes = {s: {"weights/w": (2, 2)} for s in range(2)}
    rule = ExplodingTensor(make_trial(steps, shapes=shapes))
    assert fired(rule) == ()
    assert rule.evidence.comparisons == 0


def test_selection_matching_nothing_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A tensor_regex matching no tensor records nothing; the error names tensor_regex."""
    rule = ExplodingTensor(
        make_trial({s: healthy(s) for s in range(3)}), tensor_regex=".*relu_output"
    )
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "tensor_regex '.*relu_output' selected no tensor" in text
    assert "set tensor_regex to select the tensors to check" in text


def test_exploding_fixture_matches_smdebug() -> None:
    """On smdebug's exploding trial (NaN from step 6, inf at 8) it fires at steps 6 to 11,
    as the reference run of the documented rule."""
    with create_trial(str(FIXTURES / "exploding")) as trial:
        assert fired(ExplodingTensor(trial)) == (6, 7, 8, 9, 10, 11)


def test_parameter_errors(make_trial: Callable[..., Any]) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial({0: healthy(0)})
    with pytest.raises(
        ConfigurationError,
        match=re.escape("ExplodingTensor parameter only_nan must be true or false, got 'maybe'"),
    ):
        ExplodingTensor(trial, only_nan="maybe")
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "ExplodingTensor parameter tensor_regex has an invalid regular expression 'gradients/('"
        ),
    ):
        ExplodingTensor(trial, tensor_regex="weights, gradients/(")


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in ExplodingTensor.PARAMETERS]
    assert declared == [("collection_names", None), ("tensor_regex", None), ("only_nan", "False")]


def test_xgboost_tree_dump_leaves_are_not_explosions(make_trial: Callable[..., Any]) -> None:
    """trees/Split holds NaN for every leaf: skipped by default, checked when selected."""
    split = np.array([0.5, np.nan, np.nan], np.float32)
    trial = make_trial({0: {"trees/Split": split, "train-logloss": np.float32([0.6])}})
    assert invoke_rule(ExplodingTensor(trial), raise_eval_cond=False).fired_steps == ()
    chosen = ExplodingTensor(trial, tensor_regex="trees/")
    assert invoke_rule(chosen, raise_eval_cond=False).fired_steps == (0,)
