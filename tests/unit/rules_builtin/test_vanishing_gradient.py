"""VanishingGradient: the threshold, step 0, saved reductions, trials without gradients and
parameter errors."""

from __future__ import annotations

import functools
import json
import logging
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
from rules_builtin.vanishing_gradient import VanishingGradient

FIXTURES = Path(__file__).parents[2] / "fixtures" / "smdebug_1_0_34" / "data"
GRADIENTS = [Collection("gradients", include_regex=["^gradients/"])]


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest) with this module's collections."""
    return functools.partial(make_trial, collections=GRADIENTS)


def gradient(mean_abs: float) -> np.ndarray:
    """A gradient whose mean absolute value is ``mean_abs``."""
    return np.array([mean_abs, -mean_abs, mean_abs, -mean_abs], dtype=np.float64)


def fired(rule: VanishingGradient) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds VanishingGradient by name, any case."""
    assert registry.lookup("vanishinggradient") is VanishingGradient


def test_fires_where_a_gradient_vanishes(make_trial: Callable[..., Any]) -> None:
    """A gradient whose mean |g| drops to 1e-9 at steps 3 and 4 fires there only."""
    means = [1e-3, 1e-3, 1e-3, 1e-9, 1e-9, 1e-3]
    steps = {
        s: {"gradients/a": gradient(m), "gradients/b": gradient(1e-2)} for s, m in enumerate(means)
    }
    assert fired(VanishingGradient(make_trial(steps))) == (3, 4)


def test_threshold(make_trial: Callable[..., Any]) -> None:
    """Mean |g| of 1e-5 is below threshold 1e-4 and not below the default 1e-7."""
    trial = make_trial({s: {"gradients/a": gradient(1e-5)} for s in range(3)})
    assert fired(VanishingGradient(trial)) == ()
    assert fired(VanishingGradient(trial, threshold="1e-4")) == (1, 2)


def test_step_0_is_never_evaluated(make_trial: Callable[..., Any]) -> None:
    """Zero gradients at step 0 do not fire (the 2019 tests: step 0 always returns False)."""
    trial = make_trial({0: {"gradients/a": gradient(0.0)}, 1: {"gradients/a": gradient(1.0)}})
    assert fired(VanishingGradient(trial)) == ()


def test_only_the_gradients_collection(make_trial: Callable[..., Any]) -> None:
    """A vanishing tensor outside the gradients collection does not fire."""
    steps = {s: {"gradients/a": gradient(1e-3), "weights/w": gradient(0.0)} for s in range(3)}
    assert fired(VanishingGradient(make_trial(steps))) == ()


def test_saved_reductions_are_used(make_trial: Callable[..., Any]) -> None:
    """A reductions-only gradient (its saved abs mean has shape (1,)) fires at step 2."""
    reductions = {
        s: {"gradients/a": compute_reductions(gradient(m), ["abs_mean", "mean"])}
        for s, m in enumerate([1e-3, 1e-3, 1e-8])
    }
    trial = make_trial({s: {} for s in range(3)}, reductions=reductions)
    assert fired(VanishingGradient(trial)) == (2,)


def test_nan_mean_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """A NaN gradient is not vanishing (ExplodingTensor reports it)."""
    trial = make_trial({s: {"gradients/a": gradient(float("nan"))} for s in range(3)})
    assert fired(VanishingGradient(trial)) == ()


def test_no_gradients_collection_checks_nothing(
    make_trial: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A trial without a gradients collection never fires, warns nothing and records no
    comparison; the checked-nothing error names the gradients collection and how to save it."""
    trial = make_trial(
        {s: {"g": gradient(0.0)} for s in range(4)},
        collections=[Collection("other", include_regex=["g"])],
    )
    rule = VanishingGradient(trial)
    with caplog.at_level(logging.WARNING):
        assert fired(rule) == ()
    assert [r.message for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=4))
    assert "the gradients collection selected no tensor" in text
    assert "save the gradients collection with the debugger hook" in text
    assert "tensor_regex" not in text  # VanishingGradient has no selection parameter


def test_firing_reason_names_tensor_value_parameter_threshold(
    make_trial: Callable[..., Any],
) -> None:
    """The firing reason gives the gradient, its mean |g|, threshold and its value."""
    trial = make_trial({s: {"gradients/a": gradient(m)} for s, m in enumerate([1, 1, 1e-9])})
    rule = VanishingGradient(trial)
    assert fired(rule) == (2,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert reason["tensors"] == ["gradients/a"] and reason["step"] == 2
    assert reason["quantity"] == "mean |gradient|"
    assert reason["value"] == pytest.approx(1e-9)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold",
        1e-7,
        "<",
    )
    assert "gradients/a" in reason["sentence"] and "1e-09" in reason["sentence"]


def test_step_0_records_no_comparison(make_trial: Callable[..., Any]) -> None:
    """Step 0, never evaluated, is not counted as checked."""
    rule = VanishingGradient(make_trial({0: {"gradients/a": gradient(0.0)}}))
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()


def test_vanishing_fixture_matches_smdebug() -> None:
    """On smdebug's vanishing trial it fires at steps 8 to 15, as the reference run."""
    with create_trial(str(FIXTURES / "vanishing")) as trial:
        assert fired(VanishingGradient(trial)) == tuple(range(8, 16))


def test_reductions_fixture_reads_saved_reductions() -> None:
    """On smdebug's reductions trial (gradients saved as reductions only) it evaluates every
    step and does not fire, as the reference run."""
    with create_trial(str(FIXTURES / "reductions")) as trial:
        result = invoke_rule(VanishingGradient(trial), raise_eval_cond=False)
    assert (result.fired_steps, result.steps_evaluated, result.steps_skipped) == ((), 5, 0)


def test_parameter_error(make_trial: Callable[..., Any]) -> None:
    """A bad threshold is a ConfigurationError naming the rule, parameter and value."""
    trial = make_trial({0: {"gradients/a": gradient(1.0)}})
    with pytest.raises(
        ConfigurationError,
        match=re.escape("VanishingGradient parameter threshold must be a number, got '1e-7f'"),
    ):
        VanishingGradient(trial, threshold="1e-7f")


def test_declared_parameters_match_the_constructor() -> None:
    """PARAMETERS holds the documented defaults (test_registry checks it against the
    constructor)."""
    declared = [(p.name, p.default) for p in VanishingGradient.PARAMETERS]
    assert declared == [("threshold", "0.0000001")]


def test_windows_and_single_steps_give_the_same_evidence(
    make_trial: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Means over windows of steps (ours) and each step's reduction_value (a trial without a
    batch read, as smdebug's) give the same comparisons and firings, and both use the hook's
    saved abs mean where it saved one beside the raw value (steps 2 and 5 fire on it)."""
    means = [1e-3, 1e-9, 1e-3, 1e-3, 1e-9, 1e-3, 1e-3]
    steps = {s: {"gradients/a": gradient(m)} for s, m in enumerate(means)}
    reductions = {
        s: {
            "gradients/a": compute_reductions(gradient(1e-8), ["abs_mean"]),
            "gradients/b": compute_reductions(gradient(m), ["abs_mean", "mean"]),
        }
        for s, m in [(2, 1e-3), (5, 1e-9)]
    }
    shapes = {3: {"gradients/c": (4,)}}

    def run() -> str:
        trial = make_trial(steps, reductions=reductions, shapes=shapes)
        rule = VanishingGradient(trial)
        fired_steps = invoke_rule(rule, raise_eval_cond=False).fired_steps
        assert fired_steps == (1, 2, 4, 5)
        return json.dumps([fired_steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    assert windowed == run()
