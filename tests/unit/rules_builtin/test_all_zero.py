"""AllZero: all-zero and mostly-zero tensors, the threshold percentage, the required selection,
reductions-only tensors and parameter errors."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.testing import compute_reductions
from evaluator.trial import create_trial
from evaluator.trial.trial import Trial
from rules_builtin import registry
from rules_builtin.all_zero import AllZero

FIXTURES = Path(__file__).parents[2] / "fixtures" / "smdebug_1_0_34" / "data"
COLLECTIONS = [
    Collection("weights", include_regex=["^weights/"]),
    Collection("gradients", include_regex=["^gradients/"]),
]


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def arrays(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def healthy(step: int) -> dict[str, object]:
    return {"weights/w": arrays(1, 2, 3, step), "gradients/w": arrays(0.1, -0.2, 0.3, 0.4)}


def fired(rule: AllZero, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds AllZero by name, any case."""
    assert registry.lookup("ALLZERO") is AllZero


def test_fires_at_the_step_where_a_tensor_is_all_zero(make_trial: Callable[..., Any]) -> None:
    """A gradient that is all zeros at step 2 only fires at step 2."""
    steps = {s: healthy(s) for s in range(5)}
    steps[2]["gradients/w"] = np.zeros((2, 2), np.float32)
    assert fired(AllZero(make_trial(steps), collection_names="weights,gradients")) == (2,)


def test_healthy_trial_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Tensors with non-zero elements never fire with the default threshold of 100%."""
    steps = {s: healthy(s) for s in range(4)}
    steps[1]["gradients/w"] = arrays(0, 0, 0, 1e-30)  # tiny is not zero
    assert fired(AllZero(make_trial(steps), tensor_regex=".*")) == ()


def test_threshold_is_a_percentage_of_zero_elements(make_trial: Callable[..., Any]) -> None:
    """Three zeros out of four (75%) fire with threshold 75 (at least), not with 80 or 100."""
    steps = {0: healthy(0), 1: {**healthy(1), "weights/w": arrays(0, 0, -0.0, 5)}}
    trial = make_trial(steps)
    assert fired(AllZero(trial, collection_names="weights", threshold="75")) == (1,)
    assert fired(AllZero(trial, collection_names="weights", threshold="80")) == ()
    assert fired(AllZero(trial, collection_names="weights")) == ()


def test_selection_by_collection_and_regex(make_trial: Callable[..., Any]) -> None:
    """An all-zero tensor outside the selection is ignored; the regex or collection finds it."""
    steps = {s: {**healthy(s), "other/x": np.zeros(3, np.float32)} for s in range(2)}
    trial = make_trial(steps)
    assert fired(AllZero(trial, collection_names="weights,gradients")) == ()
    assert fired(AllZero(trial, collection_names="weights", tensor_regex="^other/")) == (0, 1)
    assert fired(AllZero(trial, tensor_regex="^oth")) == (0, 1)


def test_empty_and_nan_tensors_are_not_zero(make_trial: Callable[..., Any]) -> None:
    """An empty tensor is skipped and NaN counts as non-zero."""
    steps = {0: {"weights/empty": np.zeros(0, np.float32), "weights/nan": arrays(float("nan"), 0)}}
    assert fired(AllZero(make_trial(steps), collection_names="weights", threshold="60")) == ()


def test_integer_and_bool_tensors(make_trial: Callable[..., Any]) -> None:
    """Zero integers and False booleans count as zero."""
    steps = {
        0: {"weights/i": np.array([0, 0], np.int32)},
        1: {"weights/b": np.array([False, False])},
    }
    assert fired(AllZero(make_trial(steps), collection_names="weights")) == (0, 1)


def test_reductions_only_tensors_use_a_zero_norm(make_trial: Callable[..., Any]) -> None:
    """A reductions-only tensor whose saved l2 norm is 0 fires at threshold 100; with a lower
    threshold the share of zeros cannot be told and it is skipped."""
    reductions = {
        0: {"gradients/w": compute_reductions(arrays(1, 0), ["l2", "mean"])},
        1: {"gradients/w": compute_reductions(arrays(0, 0), ["l2", "mean"])},
    }
    trial = make_trial({0: {}, 1: {}}, reductions=reductions)
    assert fired(AllZero(trial, collection_names="gradients")) == (1,)
    assert fired(AllZero(trial, collection_names="gradients", threshold="50")) == ()


def test_reductions_without_an_all_zero_witness_are_skipped(make_trial: Callable[..., Any]) -> None:
    """A plain mean of 0 does not prove all zeros (-1 and 1), so it does not fire."""
    reductions = {0: {"gradients/w": compute_reductions(arrays(-1, 1), ["mean"])}}
    assert fired(AllZero(make_trial({0: {}}, reductions=reductions), tensor_regex=".*")) == ()


def test_firing_reason_names_tensor_percent_and_threshold(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the tensor, its zero percentage and threshold."""
    steps = {s: healthy(s) for s in range(3)}
    steps[1]["gradients/w"] = arrays(0, 0, 0, 1)
    rule = AllZero(make_trial(steps), collection_names="gradients", threshold="75")
    assert fired(rule) == (1,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (1, ["gradients/w"])
    assert (reason["quantity"], reason["value"]) == ("zero elements (%)", 75)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold",
        75,
        ">=",
    )
    assert "75% of gradients/w is zero (>= threshold 75%) at step 1" in reason["sentence"]


def test_selection_matching_nothing_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A collection the trial lacks records nothing; the error names it and tensor_regex."""
    rule = AllZero(make_trial({s: healthy(s) for s in range(3)}), collection_names="relu")
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "collection_names 'relu' selected no tensor" in text
    assert "set tensor_regex to select the tensors to check" in text


def test_dtypes_fixture_fires_on_the_zeros_tensor() -> None:
    """On smdebug's dtypes trial, tensor_regex .* fires at 0, 1, 2 (dt/zeros), as
    docs/compatibility.md records (smdebug itself failed reading int16)."""
    with create_trial(str(FIXTURES / "dtypes")) as trial:
        assert fired(AllZero(trial, tensor_regex=".*")) == (0, 1, 2)


def test_needs_collection_names_or_tensor_regex(make_trial: Callable[..., Any]) -> None:
    """Without collection_names and tensor_regex the rule is a ConfigurationError."""
    trial = make_trial({0: healthy(0)})
    with pytest.raises(ConfigurationError, match="AllZero needs collection_names or tensor_regex"):
        AllZero(trial)
    with pytest.raises(ConfigurationError, match="AllZero needs"):
        AllZero(trial, collection_names=" , ", tensor_regex="")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": "lots"}, "AllZero parameter threshold must be a number, got 'lots'"),
        (
            {"threshold": "0"},
            "AllZero parameter threshold must be a percentage in (0, 100], got '0'",
        ),
        (
            {"threshold": "100.5"},
            "AllZero parameter threshold must be a percentage in (0, 100], got '100.5'",
        ),
        (
            {"tensor_regex": "[a-"},
            "AllZero parameter tensor_regex has an invalid regular expression '[a-'",
        ),
    ],
)
def test_parameter_errors(
    make_trial: Callable[..., Any], kwargs: dict[str, str], message: str
) -> None:
    """A bad parameter value is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial({0: healthy(0)})
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        AllZero(trial, **{"collection_names": "weights", **kwargs})


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in AllZero.PARAMETERS]
    assert declared == [("collection_names", None), ("tensor_regex", None), ("threshold", "100")]


@pytest.mark.parametrize(
    "make",
    [
        lambda s: np.where(np.arange(12) < 3 * s, 0, 1).astype(np.float32),
        lambda s: np.where(np.arange(12) < 3 * s, 0, 7).astype(np.int64).reshape(3, 4),
        lambda s: np.arange(12) >= 3 * s,  # bool
        lambda s: np.zeros((0, 3), np.float32),  # empty: not checked
    ],
)
def test_windows_and_single_values_give_the_same_evidence(
    make_trial: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[int], np.ndarray],
) -> None:
    """Zeros counted over windows of steps (ours) and over each step's value alone (a trial
    without a batch read, as smdebug's) give the same comparisons and firings."""

    def run() -> str:
        trial = make_trial({s: {"weights/w": make(s)} for s in range(5)})
        rule = AllZero(trial, tensor_regex="weights/.*", threshold="50")
        steps = invoke_rule(rule, raise_eval_cond=False).fired_steps
        return json.dumps([steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    assert windowed == run()
