"""FeatureImportanceOverweight: top-n share of normalised importances, selection, errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from rules_builtin import registry
from rules_builtin.feature_importance_overweight import FeatureImportanceOverweight


def importances(weights: Sequence[float], kind: str = "weight") -> dict[str, object]:
    """XGBoost hook tensors ``feature_importance/<kind>/f<i>``, one scalar per feature."""
    return {f"feature_importance/{kind}/f{i}": np.float32(w) for i, w in enumerate(weights)}


SPREAD = [0.1] * 10  # top 3 hold 0.3
CONCENTRATED = [0.5, 0.2, 0.15, 0.05, 0.05, 0.05]  # top 3 hold 0.85


def test_registered() -> None:
    """The registry finds FeatureImportanceOverweight by name."""
    assert registry.lookup("featureimportanceoverweight") is FeatureImportanceOverweight


def test_fires_at_the_step_importance_concentrates(make_trial: Callable[..., Any]) -> None:
    """Spread importances do not fire; concentrated ones at step 10 do."""
    trial = make_trial(
        {0: importances(SPREAD), 5: importances(SPREAD), 10: importances(CONCENTRATED)}
    )
    result = invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False)
    assert result.fired_steps == (10,)


def test_share_equal_to_threshold_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Top-3 share exactly 0.75 with threshold 0.75 is not above it."""
    trial = make_trial({0: importances([0.25, 0.25, 0.25, 0.25])})
    rule = FeatureImportanceOverweight(trial, threshold="0.75")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()


def test_values_are_normalised(make_trial: Callable[..., Any]) -> None:
    """Raw, unnormalised importances give the same share as normalised ones."""
    trial = make_trial({0: importances([w * 40 for w in CONCENTRATED])})
    result = invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False)
    assert result.fired_steps == (0,)


def test_nfeatures_changes_the_share(make_trial: Callable[..., Any]) -> None:
    """With nfeatures=1 the largest feature alone (0.5) stays under 0.8."""
    trial = make_trial({0: importances(CONCENTRATED)})
    rule = FeatureImportanceOverweight(trial, nfeatures="1")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()


def test_few_features_fire(make_trial: Callable[..., Any]) -> None:
    """A model that used only nfeatures features has all its importance on them: fires."""
    trial = make_trial({0: importances([0.6, 0.4])})
    assert invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False).fired_steps == (
        0,
    )


def test_only_weight_importances_by_default(make_trial: Callable[..., Any]) -> None:
    """Concentrated gain importances are ignored by the default tensor_regex."""
    trial = make_trial({0: {**importances(SPREAD), **importances(CONCENTRATED, "gain")}})
    assert invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False).fired_steps == ()
    rule = FeatureImportanceOverweight(trial, tensor_regex="feature_importance/gain/")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (0,)


def test_vector_of_importances(make_trial: Callable[..., Any]) -> None:
    """One tensor holding all importances counts each element as a feature."""
    trial = make_trial({3: {"feature_importance/weight": np.array(CONCENTRATED)}})
    assert invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False).fired_steps == (
        3,
    )


def test_step_without_importances_is_skipped(make_trial: Callable[..., Any]) -> None:
    """A step with no matching tensor is skipped."""
    trial = make_trial({0: {"train-rmse": np.float32(1.0)}, 1: importances(SPREAD)})
    result = invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False)
    assert (result.steps_skipped, result.steps_evaluated, result.fired_steps) == (1, 1, ())


def test_firing_reason_names_tensors_share_and_threshold(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the importance tensors, the top-3 share and threshold."""
    rule = FeatureImportanceOverweight(make_trial({10: importances(CONCENTRATED)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (10,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert reason["step"] == 10
    assert reason["tensors"] == [f"feature_importance/weight/f{i}" for i in range(6)]
    assert reason["quantity"] == "share of the 3 largest feature importances"
    assert reason["value"] == pytest.approx(0.85)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold",
        0.8,
        ">",
    )
    assert (
        "the 3 largest of 6 feature importances hold 0.85 > threshold 0.8 of the total at "
        "step 10" in reason["sentence"]
    )


def test_deep_learning_trial_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A trial without feature importances records nothing; the error names tensor_regex and
    the XGBoost collection to save."""
    rule = FeatureImportanceOverweight(make_trial({s: {"loss": np.float32(1)} for s in range(3)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "tensor_regex '.*feature_importance/weight' selected no tensor" in text
    assert "save the feature_importance collection with the XGBoost hook" in text
    assert "set tensor_regex" in text


@pytest.mark.parametrize(
    "kwargs, name, value",
    [
        ({"threshold": "most"}, "threshold", "most"),
        ({"nfeatures": "three"}, "nfeatures", "three"),
        ({"nfeatures": "0"}, "nfeatures", "0"),
        ({"nfeatures": "2.5"}, "nfeatures", "2.5"),
        ({"tensor_regex": "(feature"}, "tensor_regex", "(feature"),
    ],
)
def test_parameter_errors(kwargs: dict[str, str], name: str, value: str) -> None:
    """A bad parameter is a ConfigurationError naming the rule, the parameter and the value."""
    with pytest.raises(ConfigurationError) as caught:
        FeatureImportanceOverweight(None, **kwargs)
    message = str(caught.value)
    assert "FeatureImportanceOverweight" in message and name in message and repr(value) in message


def test_a_first_tree_using_few_features_is_not_judged(make_trial: Callable[..., Any]) -> None:
    """Step 0 uses 2 features (share 1 by construction); once more are used, spread is fine."""
    trial = make_trial({0: importances([0.6, 0.4]), 4: importances(SPREAD)})
    assert invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False).fired_steps == ()


def test_a_model_that_keeps_using_few_features_fires_at_the_end(
    make_trial: Callable[..., Any],
) -> None:
    """A model still using <= nfeatures features when the data ends fires at its newest step."""
    trial = make_trial({0: importances([1.0]), 4: importances([0.7, 0.3]), 8: {"other": 1.0}})
    assert invoke_rule(FeatureImportanceOverweight(trial), raise_eval_cond=False).fired_steps == (
        4,
    )
