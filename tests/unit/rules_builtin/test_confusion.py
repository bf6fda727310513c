"""Confusion: the 2019 test vectors, category inference, tensor lookup and parameter errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError, InsufficientInformationForRuleInvocation
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin._labels import class_ids, confusion_matrix
from rules_builtin.confusion import Confusion

TEN = np.arange(10)
ONE_WRONG = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 0])  # class 9 predicted as 0


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest), collections given second."""

    def make(
        steps: Mapping[int, Mapping[str, object]], collections: Sequence[Collection] = ()
    ) -> Any:
        return make_trial(steps, collections=collections)

    return make


def test_registered() -> None:
    """The registry finds Confusion by name, any case."""
    assert registry.lookup("confusion") is Confusion


def test_identity_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """Predictions equal to the labels never fire (2019 vector)."""
    trial = make_trial({0: {"labels": TEN, "predictions": TEN}})
    assert invoke_rule(Confusion(trial), raise_eval_cond=False).fired_steps == ()


def test_one_wrong_of_ten_classes_fires(make_trial: Callable[..., Any]) -> None:
    """Ten classes with one sample mispredicted fire at that step (2019 vector)."""
    trial = make_trial(
        {0: {"labels": TEN, "predictions": TEN}, 1: {"labels": TEN, "predictions": ONE_WRONG}}
    )
    result = invoke_rule(Confusion(trial), raise_eval_cond=False)
    assert result.fired_steps == (1,)
    assert result.steps_evaluated == 2


def test_off_diagonal_bound_alone_fires(make_trial: Callable[..., Any]) -> None:
    """With min_diag=0 and max_off_diag=0.01 one wrong sample still fires (2019 vector)."""
    trial = make_trial({4: {"labels": TEN, "predictions": ONE_WRONG}})
    rule = Confusion(trial, min_diag="0", max_off_diag="0.01")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (4,)


def test_defaults_find_tensors_named_labels_and_predictions(make_trial: Callable[..., Any]) -> None:
    """Without arguments the rule reads tensors named exactly labels/predictions (2019 vector)."""
    labels = np.repeat(np.arange(3), 20)
    trial = make_trial(
        {
            0: {"labels": labels, "predictions": labels},
            1: {"labels": labels, "predictions": np.roll(labels, 20)},
        }
    )
    result = invoke_rule(Confusion(trial), raise_eval_cond=False)
    assert result.fired_steps == (1,)


def test_recall_just_above_min_diag_does_not_fire(make_trial: Callable[..., Any]) -> None:
    """A class with 95% recall and 5% confused is within the default bounds."""
    labels = np.repeat([0, 1], 100)
    predictions = labels.copy()
    predictions[:5] = 1
    trial = make_trial({0: {"labels": labels, "predictions": predictions}})
    assert invoke_rule(Confusion(trial), raise_eval_cond=False).fired_steps == ()


def test_collections_are_used_when_no_tensor_has_the_name(make_trial: Callable[..., Any]) -> None:
    """Labels and predictions are found through labels_collection / predictions_collection."""
    collections = [
        Collection("y", include_regex=["^truth_"]),
        Collection("yhat", include_regex=["^guess_"]),
    ]
    trial = make_trial(
        {0: {"truth_0": TEN, "guess_0": TEN}, 1: {"truth_0": TEN, "guess_0": ONE_WRONG}},
        collections,
    )
    rule = Confusion(trial, labels_collection="y", predictions_collection="yhat")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (1,)


def test_custom_tensor_names(make_trial: Callable[..., Any]) -> None:
    """The labels/predictions parameters name the tensors to read."""
    trial = make_trial({2: {"y": TEN, "p": ONE_WRONG, "labels": TEN, "predictions": TEN}})
    rule = Confusion(trial, labels="y", predictions="p")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (2,)


def test_probability_rows_are_reduced_by_argmax(make_trial: Callable[..., Any]) -> None:
    """Predictions of shape (n, classes) count as their argmax class."""
    scores = np.eye(10, dtype=np.float32)[ONE_WRONG]
    trial = make_trial(
        {
            0: {"labels": TEN, "predictions": np.eye(10, dtype=np.float32)},
            1: {"labels": TEN, "predictions": scores},
        }
    )
    assert invoke_rule(Confusion(trial), raise_eval_cond=False).fired_steps == (1,)


def test_category_no_drops_ids_outside_the_classes(make_trial: Callable[..., Any]) -> None:
    """With category_no=9, the pair holding class 9 is left out, so nothing fires."""
    trial = make_trial({0: {"labels": TEN, "predictions": ONE_WRONG}})
    rule = Confusion(trial, category_no="9")
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()


def test_step_without_labels_is_skipped(make_trial: Callable[..., Any]) -> None:
    """A step that saved no labels is skipped, not evaluated."""
    trial = make_trial({0: {"loss": np.float32(1.0)}, 1: {"labels": TEN, "predictions": TEN}})
    result = invoke_rule(Confusion(trial), raise_eval_cond=False)
    assert (result.steps_skipped, result.steps_evaluated, result.fired_steps) == (1, 1, ())


def test_length_mismatch_is_not_evaluated(make_trial: Callable[..., Any]) -> None:
    """Labels and predictions of different lengths do not fire."""
    trial = make_trial({0: {"labels": TEN, "predictions": TEN[:5]}})
    assert invoke_rule(Confusion(trial), raise_eval_cond=False).fired_steps == ()


def test_firing_reason_names_tensors_recall_and_min_diag(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the labels and predictions tensors, the class's recall and
    min_diag; rows before it were compared on both bounds."""
    rule = Confusion(make_trial({4: {"labels": TEN, "predictions": ONE_WRONG}}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (4,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (4, ["labels", "predictions"])
    assert (reason["quantity"], reason["value"]) == ("recall of class 9", 0)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "min_diag",
        0.9,
        "<",
    )
    assert "class 9: recall 0 < min_diag 0.9 at step 4" in reason["sentence"]
    assert rule.evidence.comparisons == 2 * 9 + 1


def test_no_labels_or_predictions_check_nothing(make_trial: Callable[..., Any]) -> None:
    """A deep-learning trial without labels records nothing; the error says what Confusion
    needs and which parameters name it."""
    rule = Confusion(make_trial({s: {"loss": np.float32(1.0)} for s in range(3)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "the labels (tensor 'labels' or collection 'labels') and the predictions" in text
    assert "set labels / predictions to the tensors' names" in text


def test_inferred_categories() -> None:
    """Without category_no the matrix has max(label, prediction) + 1 rows."""
    matrix, dropped = confusion_matrix(np.array([0.0, 1.0]), np.array([0.0, 4.0]))
    assert matrix.shape == (5, 5) and matrix[1, 4] == 1 and dropped == 0


def test_class_ids_round_binary_probabilities() -> None:
    """1-d probabilities become classes 0/1 by rounding."""
    assert class_ids(np.array([0.1, 0.9, 0.4])).tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "kwargs, name, value",
    [
        ({"category_no": "many"}, "category_no", "many"),
        ({"category_no": "2.5"}, "category_no", "2.5"),
        ({"category_no": "0"}, "category_no", "0"),
        ({"min_diag": "high"}, "min_diag", "high"),
        ({"max_off_diag": "x"}, "max_off_diag", "x"),
    ],
)
def test_parameter_errors(kwargs: dict[str, str], name: str, value: str) -> None:
    """A bad parameter is a ConfigurationError naming the rule, the parameter and the value."""
    with pytest.raises(ConfigurationError) as caught:
        Confusion(None, **kwargs)
    message = str(caught.value)
    assert "Confusion" in message and name in message and repr(value) in message


def test_only_the_trained_model_is_judged(make_trial: Callable[..., Any]) -> None:
    """An untrained model's predictions at step 0 do not fire; the newest step is judged."""
    trial = make_trial(
        {0: {"labels": TEN, "predictions": np.zeros(10)}, 5: {"labels": TEN, "predictions": TEN}}
    )
    assert invoke_rule(Confusion(trial)).fired_steps == ()


def test_a_bad_trained_model_fires_at_the_step_judged(make_trial: Callable[..., Any]) -> None:
    """When the newest step's matrix breaks a bound, the rule fires at that step."""
    trial = make_trial(
        {
            0: {"labels": TEN, "predictions": TEN},
            5: {"labels": TEN, "predictions": ONE_WRONG},
            7: {"other": TEN},
        }
    )
    rule = Confusion(trial)
    assert invoke_rule(rule).fired_steps == (5,)
    assert rule.evidence.summary()["reasons"][0]["step"] == 5


def test_validation_predictions_are_preferred(tmp_path: Path) -> None:
    """With EVAL steps that saved labels and predictions, the newest EVAL one is judged."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections([])
    writer.write_step(0, {"labels": TEN, "predictions": TEN}, mode=ModeKeys.TRAIN, mode_step=0)
    writer.write_step(1, {"labels": TEN, "predictions": ONE_WRONG}, mode=ModeKeys.EVAL, mode_step=0)
    writer.write_step(2, {"labels": TEN, "predictions": TEN}, mode=ModeKeys.TRAIN, mode_step=1)
    writer.end_training()
    trial = create_trial(str(tmp_path / "t"))
    try:
        assert invoke_rule(Confusion(trial)).fired_steps == (1,)
    finally:
        trial.close()


def _predicted(recall: float, n: int = 100) -> dict[str, np.ndarray]:
    """Two balanced classes, class 1 recalled at ``recall`` (the rest predicted as 0)."""
    labels = np.repeat([0, 1], n)
    predictions = labels.copy()
    predictions[n : n + int(round((1.0 - recall) * n))] = 0
    return {"labels": labels, "predictions": predictions}


def test_a_model_settled_while_confused_fires_during_training(
    make_trial: Callable[..., Any],
) -> None:
    """Recall stuck at 0.5 for three evaluations in a row fires at the third, not at the end."""
    trial = make_trial({step: _predicted(0.5) for step in range(0, 50, 5)})
    result = invoke_rule(Confusion(trial), raise_eval_cond=False)
    assert result.fired_steps[0] == 10


def test_a_model_still_improving_is_left_to_improve(make_trial: Callable[..., Any]) -> None:
    """Recall rising 0.5, 0.6, ..., 0.95: below min_diag at first, never settled: quiet."""
    recalls = [0.5, 0.6, 0.7, 0.8, 0.85, 0.95, 0.95]
    trial = make_trial({5 * i: _predicted(r) for i, r in enumerate(recalls)})
    assert invoke_rule(Confusion(trial), raise_eval_cond=False).fired_steps == ()


def test_a_regression_is_no_classification(make_trial: Callable[..., Any]) -> None:
    """Continuous labels (an XGBoost regression's targets) end with Insufficient information
    naming a label value, instead of firing on rounded 'classes'."""
    rng = np.random.default_rng(5)
    y = rng.normal(10.0, 3.0, size=200).astype(np.float32)
    trial = make_trial({s: {"labels": y, "predictions": y + 0.3} for s in range(5)})
    with pytest.raises(InsufficientInformationForRuleInvocation, match="continuous values"):
        invoke_rule(Confusion(trial), raise_eval_cond=False)
