"""ClassImbalance: the 2019 test vector, accumulation, mispredictions and parameter errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError, InsufficientInformationForRuleInvocation
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from rules_builtin import registry
from rules_builtin.class_imbalance import ClassImbalance


def balanced(n: int = 600) -> np.ndarray:
    """``n`` labels alternating between classes 0 and 1."""
    return np.arange(n) % 2


def minority(n: int = 600) -> np.ndarray:
    """``n`` labels, 70% class 0 and 30% class 1: class 1 is underrepresented (at most half
    the largest class) but the imbalance ratio (2.3) stays under the default threshold."""
    return (np.arange(n) % 10 >= 7).astype(np.int64)


def test_registered() -> None:
    """The registry finds ClassImbalance by name."""
    assert registry.lookup("ClassImbalance") is ClassImbalance


def test_2019_vector_fires_at_step_3(make_trial: Callable[..., Any]) -> None:
    """990 zeros and 10 ones saved as labels_0 at step 3 fire at step 3."""
    labels = np.array([0] * 990 + [1] * 10, dtype=np.float32)
    trial = make_trial(
        {
            0: {"loss": np.float32(1)},
            1: {"loss": np.float32(1)},
            2: {"loss": np.float32(1)},
            3: {"labels_0": labels},
        }
    )
    rule = ClassImbalance(trial, labels_regex="labels_0", predictions_regex="labels_0")
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps == (3,)


def test_balanced_and_well_predicted_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Balanced labels with correct predictions never fire."""
    labels = balanced()
    trial = make_trial({s: {"labels": labels, "predictions": labels} for s in range(3)})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == ()


def test_waits_for_samples_accumulated_over_steps(make_trial: Callable[..., Any]) -> None:
    """Imbalanced steps of 200 labels fire only once 500 labels were seen: at the third."""
    labels = np.array([0] * 195 + [1] * 5)
    trial = make_trial({s: {"labels": labels, "predictions": labels} for s in (0, 5, 10, 15)})
    result = invoke_rule(ClassImbalance(trial), raise_eval_cond=False)
    assert result.fired_steps == (10, 15)


def test_ratio_at_threshold_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """A largest/smallest ratio equal to threshold_imbalance is not above it."""
    labels = np.array([0] * 500 + [1] * 50)
    trial = make_trial({0: {"labels": labels, "predictions": labels}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == ()


def test_single_class_is_not_imbalance(make_trial: Callable[..., Any]) -> None:
    """Labels of one class only give no ratio, so nothing fires."""
    labels = np.zeros(600)
    trial = make_trial({0: {"labels": labels, "predictions": labels}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == ()


def test_mispredicted_class_fires(make_trial: Callable[..., Any]) -> None:
    """An underrepresented class whose samples are 80% predicted as another class fires."""
    labels = minority()
    wrong = labels.copy()
    ones = np.flatnonzero(labels == 1)
    wrong[ones[: int(0.8 * ones.size)]] = 0
    trial = make_trial({0: {"loss": np.float32(1)}, 1: {"labels": labels, "predictions": wrong}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == (1,)


def test_firing_reason_names_tensors_ratio_and_threshold(make_trial: Callable[..., Any]) -> None:
    """The imbalance reason gives the labels tensor, the class count ratio and
    threshold_imbalance; a misprediction reason gives its share and threshold_misprediction."""
    labels = np.array([0] * 990 + [1] * 10)
    rule = ClassImbalance(make_trial({2: {"labels": labels, "predictions": labels}}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (2,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (2, ["labels"])
    assert (reason["quantity"], reason["value"]) == ("largest / smallest class count ratio", 99)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold_imbalance",
        10,
        ">",
    )
    assert (
        "class 0 has 990 labels and class 1 10 (ratio 99 > threshold_imbalance 10) at "
        "step 2" in reason["sentence"]
    )

    labels = minority()
    wrong = np.where(labels == 1, 0, labels)
    rule = ClassImbalance(make_trial({0: {"labels": labels, "predictions": wrong}}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (0,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert reason["tensors"] == ["labels", "predictions"]
    assert (reason["quantity"], reason["value"]) == ("share of class 1 samples mispredicted", 1)
    assert (reason["parameter"], reason["threshold"]) == ("threshold_misprediction", 0.7)


def test_no_labels_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A trial without labels (a deep-learning run saving only losses) records nothing; the
    error names labels_regex and how to save labels."""
    rule = ClassImbalance(make_trial({s: {"loss": np.float32(1)} for s in range(3)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "labels_regex '.*labels' selected no tensor" in text
    assert "set labels_regex to select the tensors to check" in text


def test_too_few_labels_check_nothing_and_say_so(make_trial: Callable[..., Any]) -> None:
    """Fewer labels than samples: no comparison; the error says how many were seen."""
    labels = np.array([0] * 195 + [1] * 5)
    rule = ClassImbalance(make_trial({0: {"labels": labels, "predictions": labels}}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert rule.evidence.comparisons == 0
    assert "200 labels seen, fewer than samples=500" in str(
        nothing_checked_error(rule, steps_visited=1)
    )


def test_mispredictions_of_balanced_classes_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """With balanced classes none is underrepresented: even all-wrong predictions don't fire
    (an untrained model's first predictions are not a class imbalance)."""
    labels = balanced()
    trial = make_trial({0: {"labels": labels, "predictions": 1 - labels}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == ()


def test_mispredictions_accumulate(make_trial: Callable[..., Any]) -> None:
    """One good step then one 100%-wrong step average to 50% wrong: no fire at 0.7."""
    labels = balanced()
    trial = make_trial(
        {
            0: {"labels": labels, "predictions": labels},
            1: {"labels": labels, "predictions": 1 - labels},
        }
    )
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == ()


def test_argmax_reduces_prediction_scores(make_trial: Callable[..., Any]) -> None:
    """With argmax=true, score rows pointing at the wrong class fire; true labels don't."""
    labels = minority()
    right = np.eye(2, dtype=np.float32)[labels]
    wrong = np.eye(2, dtype=np.float32)[1 - labels]
    trial = make_trial(
        {0: {"labels": labels, "predictions": right}, 1: {"labels": labels, "predictions": wrong}}
    )
    rule = ClassImbalance(trial, argmax="true", samples="1200")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    trial2 = make_trial({3: {"labels": labels, "predictions": wrong}})
    rule2 = ClassImbalance(trial2, argmax="True")
    assert invoke_rule(rule2, raise_eval_cond=False).fired_steps == (3,)


def test_binary_probabilities_are_rounded(make_trial: Callable[..., Any]) -> None:
    """Without argmax, 1-d probabilities count as class 1 above 0.5."""
    labels = minority()
    probabilities = np.where(labels == 1, 0.2, 0.1).astype(np.float32)  # all predict class 0
    trial = make_trial({7: {"labels": labels, "predictions": probabilities}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == (7,)


def test_steps_without_labels_are_skipped(make_trial: Callable[..., Any]) -> None:
    """A step that saved no labels is skipped."""
    trial = make_trial({0: {"loss": np.float32(1)}})
    result = invoke_rule(ClassImbalance(trial), raise_eval_cond=False)
    assert (result.steps_skipped, result.fired_steps) == (1, ())


@pytest.mark.parametrize(
    "kwargs, name, value",
    [
        ({"threshold_imbalance": "ten"}, "threshold_imbalance", "ten"),
        ({"threshold_misprediction": "most"}, "threshold_misprediction", "most"),
        ({"samples": "lots"}, "samples", "lots"),
        ({"samples": "0"}, "samples", "0"),
        ({"argmax": "maybe"}, "argmax", "maybe"),
        ({"labels_regex": "(labels"}, "labels_regex", "(labels"),
        ({"predictions_regex": "[pred"}, "predictions_regex", "[pred"),
        ({"labels_regex": ""}, "labels_regex", ""),
    ],
)
def test_parameter_errors(kwargs: dict[str, str], name: str, value: str) -> None:
    """A bad parameter is a ConfigurationError naming the rule, the parameter and the value."""
    with pytest.raises(ConfigurationError) as caught:
        ClassImbalance(None, **kwargs)
    message = str(caught.value)
    assert "ClassImbalance" in message and name in message and repr(value) in message


def test_keras_class_scores_are_reduced_by_argmax(make_trial: Callable[..., Any]) -> None:
    """Keras saves predictions as per-class scores (samples, classes): with argmax left False
    they are still read by argmax, so an underrepresented class predicted wrong fires."""
    labels = minority()
    wrong = labels.copy()
    ones = np.flatnonzero(labels == 1)
    wrong[ones[: int(0.8 * ones.size)]] = 0
    scores = np.eye(2, dtype=np.float32)[wrong] * 0.8 + 0.1
    trial = make_trial({0: {"loss": np.float32(1)}, 1: {"labels": labels, "predictions": scores}})
    assert invoke_rule(ClassImbalance(trial), raise_eval_cond=False).fired_steps == (1,)


@pytest.mark.parametrize("size", [0, 7, 4096, 4097, 50_000])
def test_counting_a_small_or_a_large_batch_gives_the_same_counts(size: int) -> None:
    """Small batches are counted from the list, large ones by sorting: one answer, keys as
    Python ints, added to what was counted before."""
    from collections import Counter

    from rules_builtin.class_imbalance import _add

    values = np.random.default_rng(size).integers(-3, 40, size).astype(np.float64)
    counts: Counter[int] = Counter({5: 2})
    _add(counts, values)
    expected = Counter({5: 2}) + Counter(int(v) for v in values)
    assert counts == expected
    assert all(type(k) is int for k in counts)


def test_a_regression_is_no_classification(make_trial: Callable[..., Any]) -> None:
    """Continuous labels (a regression's targets) end with Insufficient information instead
    of counting rounded values as classes and firing."""
    rng = np.random.default_rng(5)
    y = rng.normal(10.0, 3.0, size=600).astype(np.float32)
    trial = make_trial({0: {"labels": y, "predictions": y}})
    with pytest.raises(InsufficientInformationForRuleInvocation, match="continuous values"):
        invoke_rule(ClassImbalance(trial), raise_eval_cond=False)
