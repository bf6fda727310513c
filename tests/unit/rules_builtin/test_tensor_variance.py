"""TensorVariance: upper and lower bounds, saved variances, selection and parameter errors."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.testing import compute_reductions
from evaluator.trial.trial import Trial
from rules_builtin import registry
from rules_builtin.tensor_variance import TensorVariance

COLLECTIONS = [
    Collection("weights", include_regex=["^weights/"]),
    Collection("gradients", include_regex=["^gradients/"]),
]


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def spread(variance: float) -> np.ndarray:
    """Four values with exactly this (ddof=0) variance: +-sqrt(variance) around 5."""
    d = np.sqrt(variance)
    return np.array([5 - d, 5 + d, 5 - d, 5 + d], dtype=np.float64)


def fired(rule: TensorVariance) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


@pytest.fixture
def trial(make_trial: Callable[..., Any]) -> Any:
    """weights/w with variances 1, 1, 50, 1, 0.001 at steps 0-4; gradients/g always 2."""
    variances = [1, 1, 50, 1, 0.001]
    return make_trial(
        {s: {"weights/w": spread(v), "gradients/g": spread(2)} for s, v in enumerate(variances)}
    )


def test_registered() -> None:
    """The registry finds TensorVariance by name, any case."""
    assert registry.lookup("TensorVariance") is TensorVariance


def test_max_threshold(trial: Any) -> None:
    """A variance above max_threshold fires at that step only; min_threshold unset is ignored."""
    assert fired(TensorVariance(trial, max_threshold="10")) == (2,)


def test_min_threshold(trial: Any) -> None:
    """A variance below min_threshold fires at that step only; max_threshold unset is ignored."""
    assert fired(TensorVariance(trial, min_threshold="0.01")) == (4,)


def test_both_bounds(trial: Any) -> None:
    """With both bounds, either side fires; variances inside them never do."""
    assert fired(TensorVariance(trial, min_threshold="0.01", max_threshold="10")) == (2, 4)
    assert fired(TensorVariance(trial, min_threshold="0.0001", max_threshold="100")) == ()


def test_selection(trial: Any) -> None:
    """Only selected tensors count: gradients/g (variance 2) alone fires against max 1.5."""
    assert fired(TensorVariance(trial, collection_names="gradients", max_threshold="1.5")) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert fired(TensorVariance(trial, tensor_regex="^weights/", max_threshold="10")) == (2,)
    assert fired(TensorVariance(trial, collection_names="weights", min_threshold="1.5")) == (
        0,
        1,
        3,
        4,
    )


def test_firing_reason_names_tensor_variance_and_bound(trial: Any) -> None:
    """Each side is its own comparison: the reasons give the tensor, variance and the bound
    (max_threshold at step 2, min_threshold at step 4)."""
    rule = TensorVariance(trial, tensor_regex="^weights/", min_threshold="0.01", max_threshold="10")
    assert fired(rule) == (2, 4)
    high, low = rule.evidence.summary()["reasons"]
    assert (high["step"], high["tensors"], high["quantity"]) == (2, ["weights/w"], "variance")
    assert high["value"] == pytest.approx(50)
    assert (high["parameter"], high["threshold"], high["comparison"]) == ("max_threshold", 10, ">")
    assert (low["step"], low["parameter"], low["threshold"], low["comparison"]) == (
        4,
        "min_threshold",
        0.01,
        "<",
    )
    assert low["value"] == pytest.approx(0.001)
    assert "variance of weights/w is 50 > max_threshold 10 at step 2" in high["sentence"]
    assert rule.evidence.comparisons == 2 * 5 - 1  # both bounds, but none after max fires


def test_selection_matching_nothing_checks_nothing(trial: Any) -> None:
    """A tensor_regex matching no tensor records nothing; the error names tensor_regex."""
    rule = TensorVariance(trial, tensor_regex="^biases/", max_threshold="10")
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=5))
    assert "tensor_regex '^biases/' selected no tensor" in text
    assert "set tensor_regex" in text


def test_saved_variance_is_used(make_trial: Callable[..., Any]) -> None:
    """A reductions-only tensor is judged by its saved variance; a shape-only one is skipped."""
    reductions = {
        s: {"weights/w": compute_reductions(spread(v), ["variance"])} for s, v in enumerate([1, 20])
    }
    shapes = {s: {"weights/shape_only": (4,)} for s in range(2)}
    trial = make_trial({0: {}, 1: {}}, reductions=reductions, shapes=shapes)
    assert fired(TensorVariance(trial, max_threshold="10")) == (1,)


def test_nan_and_string_tensors_are_skipped(make_trial: Callable[..., Any]) -> None:
    """A NaN variance and a tensor of strings never fire and never fail the rule."""
    steps = {0: {"weights/nan": np.array([1.0, np.nan]), "text": np.array([b"a", b"b"])}}
    trial = make_trial(steps)
    assert fired(TensorVariance(trial, min_threshold="1", max_threshold="2")) == ()


def test_needs_a_bound(trial: Any) -> None:
    """Without max_threshold and min_threshold the rule could never fire: ConfigurationError."""
    with pytest.raises(
        ConfigurationError, match="TensorVariance needs max_threshold or min_threshold"
    ):
        TensorVariance(trial)
    with pytest.raises(ConfigurationError, match="TensorVariance needs"):
        TensorVariance(trial, max_threshold="None", min_threshold="")


def test_min_above_max_is_an_error(trial: Any) -> None:
    """min_threshold above max_threshold (everything would fire) is a ConfigurationError."""
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TensorVariance parameter min_threshold must not exceed max_threshold, got "
            "min_threshold='5' and max_threshold='1'"
        ),
    ):
        TensorVariance(trial, max_threshold="1", min_threshold="5")


@pytest.mark.parametrize(("name", "value"), [("max_threshold", "big"), ("min_threshold", "1,0")])
def test_parameter_errors(trial: Any, name: str, value: str) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    message = f"TensorVariance parameter {name} must be a number, got {value!r}"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        TensorVariance(trial, **{name: value})


def test_invalid_tensor_regex(trial: Any) -> None:
    """A bad tensor_regex is a ConfigurationError naming the rule, parameter and regex."""
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TensorVariance parameter tensor_regex has an invalid regular expression '(?P<'"
        ),
    ):
        TensorVariance(trial, max_threshold="1", tensor_regex="(?P<")


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in TensorVariance.PARAMETERS]
    assert declared == [
        ("collection_names", None),
        ("tensor_regex", None),
        ("max_threshold", None),
        ("min_threshold", None),
    ]


def test_windows_and_single_steps_give_the_same_evidence(
    make_trial: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variances over windows of steps (ours) and each step's reduction_value (a trial without
    a batch read, as smdebug's) give the same comparisons and firings, and both use the hook's
    saved variance where it saved one beside the raw value (steps 2 and 4 fire on it)."""
    variances = [1, 50, 1, 1, 1, 0.001, 1]
    steps = {
        s: {"weights/w": spread(v), "weights/i": np.arange(4), "text": np.array([b"a"])}
        for s, v in enumerate(variances)
    }
    steps[3]["weights/nan"] = np.array([1.0, np.nan])
    reductions = {
        s: {
            "weights/w": compute_reductions(spread(v), ["variance"]),
            "gradients/g": compute_reductions(spread(v), ["variance", "mean"]),
        }
        for s, v in [(2, 30), (4, 0.01)]
    }
    shapes = {3: {"gradients/shape_only": (4,)}}

    def run() -> str:
        trial = make_trial(steps, reductions=reductions, shapes=shapes)
        rule = TensorVariance(trial, tensor_regex=".*", min_threshold="0.1", max_threshold="10")
        fired_steps = invoke_rule(rule, raise_eval_cond=False).fired_steps
        assert fired_steps == (1, 2, 4, 5)
        return json.dumps([fired_steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    assert windowed == run()
