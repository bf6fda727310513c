"""SimilarAcrossRuns: comparing with other trials step for step, tolerance, modes, selection,
reductions-only tensors and the other_trials parameter."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.rules.loader import build_rule
from evaluator.testing import compute_reductions
from rules_builtin import registry
from rules_builtin.similar_across_runs import SimilarAcrossRuns, _count_differing

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
COLLECTIONS = [
    Collection("weights", include_regex=["^weights/"]),
    Collection("losses", include_regex=["loss"]),
]

Steps = Mapping[int, Mapping[str, object]]
Modes = Mapping[int, tuple[ModeKeys, int]]  # global step -> (mode, mode step)


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=COLLECTIONS)


def run(step: int, *, w: float = 1.0, loss: float | None = None) -> dict[str, object]:
    """A step of a run: weights/w = [step, w] and a loss."""
    return {
        "weights/w": np.array([step, w], np.float32),
        "loss": np.float32(1.0 / (step + 1) if loss is None else loss),
    }


def fired(rule: SimilarAcrossRuns, start_step: int = 0) -> tuple[int, ...]:
    return invoke_rule(rule, start_step, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds SimilarAcrossRuns by name, any case."""
    assert registry.lookup("similaracrossruns") is SimilarAcrossRuns


def test_identical_runs_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Two runs that saved the same values never fire."""
    base = make_trial({s: run(s) for s in range(5)})
    other = make_trial({s: run(s) for s in range(5)})
    assert fired(SimilarAcrossRuns(base, [other])) == ()


def test_fires_at_the_step_where_runs_differ(make_trial: Callable[..., Any]) -> None:
    """Runs that differ at step 3 only fire at step 3."""
    base = make_trial({s: run(s) for s in range(5)})
    other = make_trial({s: run(s, w=2.0 if s == 3 else 1.0) for s in range(5)})
    assert fired(SimilarAcrossRuns(base, [other])) == (3,)


def test_differences_within_tolerance_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """numpy.allclose's default tolerance: 1e-7 relative apart is alike, 1e-3 is not."""
    base = make_trial({s: run(s) for s in range(3)})
    close = make_trial({s: run(s, w=1.0 + 1e-7) for s in range(3)})
    far = make_trial({s: run(s, w=1.0 + 1e-3) for s in range(3)})
    assert fired(SimilarAcrossRuns(base, [close])) == ()
    assert fired(SimilarAcrossRuns(base, [far])) == (0, 1, 2)


def test_nan_at_the_same_place_is_alike(make_trial: Callable[..., Any]) -> None:
    """Both runs with NaN at the same element are alike; NaN in one run only differs."""
    base = make_trial({s: run(s, w=float("nan")) for s in range(2)})
    same = make_trial({s: run(s, w=float("nan")) for s in range(2)})
    finite = make_trial({s: run(s) for s in range(2)})
    assert fired(SimilarAcrossRuns(base, [same])) == ()
    assert fired(SimilarAcrossRuns(base, [finite])) == (0, 1)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.array([1.0, np.nan, 3.0], np.float32), np.array([1.0, np.nan, 3.0], np.float32)),
        (np.array([0.0, 2.0]), np.array([-0.0, 2.0])),  # equal values, other bytes
        (np.array([np.nan]), np.array([np.nan]) * -1),  # NaNs of other signs
        (np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64)),
        (np.array([1, 2], np.int32), np.array([1, 2], np.int64)),  # other dtypes, same values
        (np.array([True, False]), np.array([True, False])),
        (np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0000002], np.float32)),  # isclose
        (np.array(["a", "b"]), np.array(["a", "c"])),
    ],
)
def test_counting_differing_elements_as_compared_without_the_byte_shortcut(
    a: np.ndarray, b: np.ndarray
) -> None:
    """Equal bytes of one numeric dtype answer 0 at once; every other pair is counted as
    element by element (== and, for numbers, isclose with NaNs alike), as before."""
    if bool(np.asanyarray(a == b).all()):
        expected = 0
    elif a.dtype.kind in "iufc" and b.dtype.kind in "iufc":
        expected = int(np.count_nonzero(~np.isclose(a, b, equal_nan=True)))
    else:
        expected = max(int(np.count_nonzero(a != b)), 1)
    assert _count_differing(a, b) == expected == _count_differing(b, a)


def test_different_shapes_differ(make_trial: Callable[..., Any]) -> None:
    """A value of another shape differs, even where numpy would broadcast it."""
    base = make_trial({0: {"weights/w": np.zeros(1, np.float32)}})
    other = make_trial({0: {"weights/w": np.zeros(3, np.float32)}})
    assert fired(SimilarAcrossRuns(base, [other])) == (0,)


def test_steps_are_matched_by_mode_step(make_trial: Callable[..., Any]) -> None:
    """TRAIN step 2 is global step 2 in one run and 4 in the other (an EVAL pass first): the
    runs are compared TRAIN step to TRAIN step, EVAL step to EVAL step."""
    base_modes = {0: (TRAIN, 0), 1: (TRAIN, 1), 2: (TRAIN, 2), 3: (EVAL, 0), 4: (EVAL, 1)}
    other_modes = {0: (TRAIN, 0), 1: (TRAIN, 1), 2: (EVAL, 0), 3: (EVAL, 1), 4: (TRAIN, 2)}
    values = {(TRAIN, 0): 1.0, (TRAIN, 1): 2.0, (TRAIN, 2): 3.0, (EVAL, 0): 7.0, (EVAL, 1): 8.0}
    base = make_trial(
        {g: {"loss": np.float32(values[m])} for g, m in base_modes.items()}, modes=base_modes
    )
    other = make_trial(
        {g: {"loss": np.float32(values[m])} for g, m in other_modes.items()}, modes=other_modes
    )
    assert fired(SimilarAcrossRuns(base, [other])) == ()
    changed = make_trial(
        {g: {"loss": np.float32(values[m] + (m == (EVAL, 1)))} for g, m in other_modes.items()},
        modes=other_modes,
    )
    assert fired(SimilarAcrossRuns(base, [changed])) == (4,)


def test_steps_and_tensors_missing_from_the_other_run_are_not_compared(
    make_trial: Callable[..., Any],
) -> None:
    """The other run stops at step 2 and never saved extra/x: nothing to compare, no fire."""
    base = make_trial({s: {**run(s), "extra/x": np.float32(s)} for s in range(5)})
    other = make_trial({s: run(s) for s in range(3)})
    assert fired(SimilarAcrossRuns(base, [other])) == ()


def test_any_of_several_other_trials(make_trial: Callable[..., Any]) -> None:
    """With two other trials, a difference from either fires."""
    base = make_trial({s: run(s) for s in range(3)})
    same = make_trial({s: run(s) for s in range(3)})
    differs = make_trial({s: run(s, w=5.0 if s == 1 else 1.0) for s in range(3)})
    assert fired(SimilarAcrossRuns(base, [same, differs])) == (1,)
    assert fired(SimilarAcrossRuns(base, (differs, same))) == (1,)


def test_selection(make_trial: Callable[..., Any]) -> None:
    """A difference in the loss only is found by collection losses or a regex, not by weights."""
    base = make_trial({s: run(s) for s in range(3)})
    other = make_trial({s: run(s, loss=9.0 if s == 2 else None) for s in range(3)})
    assert fired(SimilarAcrossRuns(base, [other], collection_names="weights")) == ()
    assert fired(SimilarAcrossRuns(base, [other], collection_names="losses")) == (2,)
    assert fired(SimilarAcrossRuns(base, [other], tensor_regex="^lo")) == (2,)
    assert fired(SimilarAcrossRuns(base, [other])) == (2,)


def test_reductions_only_tensors_compare_their_reductions(make_trial: Callable[..., Any]) -> None:
    """Reductions-only tensors are compared by the reductions both runs saved."""

    def saved(values: list[list[float]]) -> dict[int, dict[str, Any]]:
        return {
            s: {"weights/w": compute_reductions(np.array(v), ["mean", "max"])}
            for s, v in enumerate(values)
        }

    base = make_trial({0: {}, 1: {}}, reductions=saved([[1, 2], [3, 4]]))
    other = make_trial({0: {}, 1: {}}, reductions=saved([[1, 2], [3, 5]]))
    assert fired(SimilarAcrossRuns(base, [other])) == (1,)


def test_firing_reason_names_tensor_count_and_limit(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the tensor, how many elements differ and the fixed limit 0."""
    base = make_trial({s: run(s) for s in range(3)})
    other = make_trial({s: run(s, w=2.0 if s == 1 else 1.0) for s in range(3)})
    rule = SimilarAcrossRuns(base, [other], collection_names="weights")
    assert fired(rule) == (1,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (1, ["weights/w"])
    assert (reason["quantity"], reason["value"]) == ("elements differing from the other run", 1)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "differing elements allowed",
        0,
        ">",
    )
    assert "weights/w at step 1 differs from trial" in reason["sentence"]
    assert "(its step 1): 1 elements differ" in reason["sentence"]


def test_selection_matching_nothing_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A collection the trial lacks records nothing; the error names it."""
    base = make_trial({s: run(s) for s in range(3)})
    other = make_trial({s: run(s) for s in range(3)})
    rule = SimilarAcrossRuns(base, [other], collection_names="gradients")
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "collection_names 'gradients' selected no tensor" in text
    assert "set tensor_regex" in text


def test_steps_missing_from_the_other_run_are_not_recorded(make_trial: Callable[..., Any]) -> None:
    """Only steps both runs saved are recorded as compared (0-2 of 0-4, two tensors each)."""
    base = make_trial({s: run(s) for s in range(5)})
    rule = SimilarAcrossRuns(base, [make_trial({s: run(s) for s in range(3)})])
    assert fired(rule) == ()
    assert rule.evidence.summary()["steps_checked"] == 3
    assert rule.evidence.comparisons == 6


def test_built_by_the_loader_with_other_trials(make_trial: Callable[..., Any]) -> None:
    """The evaluator's build_rule passes its other trials; with none, ConfigurationError."""
    base = make_trial({s: run(s) for s in range(3)})
    other = make_trial({s: run(s, w=3.0) for s in range(3)})
    rule = build_rule(
        SimilarAcrossRuns, base, {"collection_names": "weights"}, other_trials=[other]
    )
    assert rule.other_trials == [other] and fired(rule) == (0, 1, 2)
    with pytest.raises(ConfigurationError, match="SimilarAcrossRuns needs other_trials"):
        build_rule(SimilarAcrossRuns, base, {})


@pytest.mark.parametrize("others", [None, [], ()])
def test_other_trials_required(make_trial: Callable[..., Any], others: Any) -> None:
    """No other trial is a ConfigurationError saying what to give."""
    base = make_trial({0: run(0)})
    with pytest.raises(ConfigurationError, match="SimilarAcrossRuns needs other_trials"):
        SimilarAcrossRuns(base, others)


def test_other_trials_must_be_trials(make_trial: Callable[..., Any]) -> None:
    """A path instead of a Trial is a ConfigurationError naming the parameter and the value."""
    base = make_trial({0: run(0)})
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "SimilarAcrossRuns parameter other_trials must be a list of trials "
            "(create_trial(path)), got 's3://bucket/run2'"
        ),
    ):
        SimilarAcrossRuns(base, ["s3://bucket/run2"])


def test_a_single_trial_is_accepted(make_trial: Callable[..., Any]) -> None:
    """other_trials may be one Trial rather than a list."""
    base = make_trial({s: run(s) for s in range(2)})
    other = make_trial({s: run(s, w=2.0) for s in range(2)})
    assert fired(SimilarAcrossRuns(base, other)) == (0, 1)


def test_invalid_tensor_regex(make_trial: Callable[..., Any]) -> None:
    """A bad tensor_regex is a ConfigurationError naming the rule, parameter and value."""
    base = make_trial({0: run(0)})
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "SimilarAcrossRuns parameter tensor_regex has an invalid regular expression '(('"
        ),
    ):
        SimilarAcrossRuns(base, [base], tensor_regex="((")


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults, other_trials required (test_registry checks
    it against the constructor)."""
    assert [(p.name, p.default, p.required) for p in SimilarAcrossRuns.PARAMETERS] == [
        ("other_trials", None, True),
        ("collection_names", None, False),
        ("tensor_regex", None, False),
    ]
