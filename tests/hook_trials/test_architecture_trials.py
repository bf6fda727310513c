"""The architectures the rules are judged on, as trials written by smdebug's real hooks
(tools/make_hook_trials: pytorch_architectures.py, keras_architectures.py,
xgboost_objectives.py): PyTorch CNN / ResNet / LSTM / transformer, Keras functional models with
inline activations and GradientTape loops, XGBoost multi-class and regression. With default
parameters every labelled fault fires when the script measured it, healthy runs end quiet
having checked what they hold, and the hooks' names are the ones docs/hook-naming.md gives."""

from __future__ import annotations

import pytest

from evaluator.rules import invoke_rule
from evaluator.trial import create_trial
from rules_builtin.dead_relu import DeadRelu
from tests.hook_trials.outcomes import (
    CHECKED_NOTHING,
    FAULTS,
    KNOWN_MISFIRES,
    ROOT,
    Outcome,
    labels,
    run_all,
)

ARCHITECTURES = [
    *(f"pytorch_{n}" for n in ("cnn_healthy", "cnn_dead_relu", "cnn_exploding",
                               "resnet_healthy", "resnet_dead_relu", "lstm_healthy",
                               "lstm_vanishing", "transformer_healthy", "transformer_stalled")),
    *(f"keras_{n}" for n in ("functional_healthy", "functional_dead_relu",
                             "functional_saturated", "tape_healthy", "tape_nan")),
    *(f"xgboost_{n}" for n in ("multiclass_healthy", "multiclass_overfit",
                               "multiclass_deep_trees", "multiclass_imbalanced",
                               "regression_healthy", "regression_flat")),
]  # fmt: skip
HEALTHY = [t for t in ARCHITECTURES if t.endswith("_healthy")]
CASES = [(t, r) for t in ARCHITECTURES for r in FAULTS[t]]


def _known(trial: str, rules: list[str] | None = None) -> list[pytest.MarkDecorator]:
    """xfail(strict) for a rule another change owns that misfires on ``trial``."""
    why = [v for (t, r), v in KNOWN_MISFIRES.items() if t == trial and (not rules or r in rules)]
    return [pytest.mark.xfail(strict=True, reason="; ".join(why))] if why else []


# What each healthy run holds that a rule must check (never "checked nothing" there).
MUST_CHECK = {
    "pytorch_cnn_healthy": ["DeadRelu", "ExplodingTensor", "VanishingGradient",
                            "LossNotDecreasing", "PoorWeightInitialization"],
    "pytorch_resnet_healthy": ["DeadRelu", "ExplodingTensor", "VanishingGradient"],
    "pytorch_lstm_healthy": ["ExplodingTensor", "VanishingGradient", "LossNotDecreasing"],
    "pytorch_transformer_healthy": ["ExplodingTensor", "VanishingGradient",
                                    "LossNotDecreasing"],
    "keras_functional_healthy": ["DeadRelu", "SaturatedActivation", "ExplodingTensor",
                                 "VanishingGradient", "LossNotDecreasing"],
    "keras_tape_healthy": ["DeadRelu", "SaturatedActivation", "ExplodingTensor",
                           "VanishingGradient", "LossNotDecreasing"],
    "xgboost_multiclass_healthy": ["Confusion", "ClassImbalance", "TreeDepth",
                                   "FeatureImportanceOverweight", "LossNotDecreasing"],
    "xgboost_regression_healthy": ["TreeDepth", "FeatureImportanceOverweight",
                                   "LossNotDecreasing"],
}  # fmt: skip


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Outcome]]:
    return run_all(tmp_path_factory.mktemp("architectures"), ARCHITECTURES)


def test_every_architecture_has_a_healthy_run_and_a_fault() -> None:
    """Each architecture has a healthy trial and at least one labelled fault."""
    kinds = {t.rsplit("_", 1)[0] for t in HEALTHY}
    for trial in ARCHITECTURES:
        if trial not in HEALTHY:
            assert FAULTS[trial], trial
            family = trial.split("_")[0] + "_" + trial.split("_")[1]
            assert family in kinds, trial


@pytest.mark.parametrize(
    ("trial", "rule"),
    [pytest.param(t, r, id=f"{r}-{t}", marks=_known(t, [r])) for t, r in CASES],
)
def test_labelled_fault_fires(
    outcomes: dict[str, dict[str, Outcome]], trial: str, rule: str
) -> None:
    """The rule fires, with default parameters, on the architecture trial made with its fault."""
    assert outcomes[rule][trial].fired, f"{rule} on {trial}: {outcomes[rule][trial].cell}"


@pytest.mark.parametrize("trial", [pytest.param(t, marks=_known(t)) for t in HEALTHY])
def test_healthy_architecture_is_quiet(outcomes: dict[str, dict[str, Outcome]], trial: str) -> None:
    """On a healthy architecture trial no rule fires."""
    fired = {rule: o[trial].cell for rule, o in outcomes.items() if o[trial].fired}
    assert fired == {}


@pytest.mark.parametrize("trial", sorted(MUST_CHECK))
def test_healthy_run_is_checked_not_vacuous(
    outcomes: dict[str, dict[str, Outcome]], trial: str
) -> None:
    """A healthy run's ReLU / tanh layers, gradients, losses, trees and classes are checked:
    the rules that read them never end 'checked nothing' there (quiet: the test above)."""
    cells = {rule: outcomes[rule][trial].cell for rule in MUST_CHECK[trial]}
    assert {rule: cell for rule, cell in cells.items() if cell == CHECKED_NOTHING} == {}
    assert all(cell == "quiet" or cell.startswith("fires") for cell in cells.values()), cells


@pytest.mark.parametrize("rule", ["Confusion", "ClassImbalance"])
@pytest.mark.parametrize("trial", ["xgboost_regression_healthy", "xgboost_regression_flat"])
def test_class_rules_say_they_cannot_judge_a_regression(
    outcomes: dict[str, dict[str, Outcome]], trial: str, rule: str
) -> None:
    """A regression's real-valued labels are no classes: the rule says it checked nothing."""
    assert outcomes[rule][trial].cell == CHECKED_NOTHING


def _first_saved_at_or_after(trial: str, step: int) -> int:
    steps = sorted(
        s for m in labels(trial)["written_by_hook"]["modes"].values() for s in m["global_steps"]
    )
    return next(s for s in steps if s >= step)


@pytest.mark.parametrize("trial", ["pytorch_cnn_exploding", "keras_tape_nan"])
def test_exploding_fires_at_the_first_saved_nonfinite_step(
    outcomes: dict[str, dict[str, Outcome]], trial: str
) -> None:
    """ExplodingTensor fires at the first saved step at or after the first NaN / inf the
    training script saw (a CNN's MSE divergence, a GradientTape loop's)."""
    first = labels(trial)["evidence"]["first_nonfinite_global_step"]
    assert first is not None
    assert outcomes["ExplodingTensor"][trial].fired[0] == _first_saved_at_or_after(trial, first)


def test_tree_depth_fires_at_the_first_round_of_deep_multiclass_trees(
    outcomes: dict[str, dict[str, Outcome]],
) -> None:
    """Multi-class boosters grow one tree per class and round; the deep ones fire at round 0,
    the healthy ones (depth <= 4, as measured) do not."""
    deep = labels("xgboost_multiclass_deep_trees")["evidence"]
    assert deep["tree_depth_per_round"][0] > 4
    assert outcomes["TreeDepth"]["xgboost_multiclass_deep_trees"].fired[0] == 0
    assert labels("xgboost_multiclass_healthy")["evidence"]["max_tree_depth"] <= 4


def test_confusion_on_a_healthy_multiclass_run_is_the_measured_one() -> None:
    """The healthy multi-class booster's validation recall is over 0.9 for every class (the
    script's own confusion matrix), which is why Confusion stays quiet on it."""
    ev = labels("xgboost_multiclass_healthy")["evidence"]
    assert min(ev["final_validation_recall"]) > 0.9


def _tensor(trial: str, layer: str) -> str:
    """A measured layer's output tensor: PyTorch ``layer1.relu`` -> ``layer1.relu_output_0``
    (``relu[1]`` -> ``relu_output_1``), Keras ``conv2d`` -> ``conv2d/outputs``."""
    if trial.startswith("keras"):
        return f"{layer}/outputs"
    module, _, call = layer.partition("[")
    return f"{module}_output_{call.rstrip(']') or 0}"


@pytest.mark.parametrize(
    "trial",
    [
        "pytorch_cnn_dead_relu",
        "pytorch_resnet_dead_relu",
        "keras_functional_dead_relu",
    ],
)
def test_dead_relu_fires_on_the_measured_dead_layers_at_the_first_step(trial: str) -> None:
    """DeadRelu fires at the first saved step on the ReLUs (conv channels, a ResNet block's
    first call of its shared ReLU, a Keras Conv2D with activation='relu') the training script
    measured over 50 % dead, and on no live one; on every dead one except a Keras layer whose
    inputs are all 0 (dense_1 after the dead conv: relu, tanh and the identity all give 0,
    no saved value tells its function)."""
    snap = labels(trial)["evidence"]["activations_first_saved_train_step"]
    relus = {n: s for n, s in snap["layers"].items() if s["kind"] == "relu"}
    dead = {_tensor(trial, n) for n, s in relus.items() if s["dead_units_pct"] > 50}
    alive = {_tensor(trial, n) for n in relus} - dead
    assert dead
    rule = DeadRelu(create_trial(str(ROOT / trial)))
    invoke_rule(rule, raise_eval_cond=False)
    found = {t for check in rule.evidence.firings_at(snap["global_step"]) for t in check.tensors}
    untold = {"dense_1/outputs"} if trial == "keras_functional_dead_relu" else set()
    assert found == dead - untold and not found & alive


def _names(trial: str) -> list[str]:
    names: list[str] = labels(trial)["written_by_hook"]["tensor_names"]
    return names


def test_lstm_tuple_outputs_are_numbered_like_calls() -> None:
    """nn.LSTM returns (output, (h_n, c_n)): the hook flattens the tuple into lstm_output_0,
    _1, _2 beside ONE lstm_input_0, so an _output_<n> is not always the n-th call."""
    names = _names("pytorch_lstm_healthy")
    assert {"lstm_output_0", "lstm_output_1", "lstm_output_2", "lstm_input_0"} <= set(names)
    assert "lstm_input_1" not in names


def test_attention_inputs_and_outputs_are_numbered_per_tensor() -> None:
    """nn.MultiheadAttention(q, k, v) -> (output, weights): attn_input_0..2, attn_output_0..1;
    GELU and LayerNorm are block.gelu_* / block.ln1_* (no relu / tanh / sigmoid name)."""
    names = set(_names("pytorch_transformer_healthy"))
    attn = {f"block.attn_input_{i}" for i in range(3)} | {
        "block.attn_output_0",
        "block.attn_output_1",
    }
    assert attn <= names
    assert {"block.gelu_input_0", "block.gelu_output_0", "block.ln1_output_0"} <= names


def test_gradient_tape_runs_are_train_mode_with_tape_names() -> None:
    """KerasHook.wrap_tape sets TRAIN: every step is a TRAIN step, one per tape block; weights
    are ``weights/<variable>`` (not ``<layer>/weights/...`` as under model.fit) and the loss
    is ``loss``."""
    for trial in ("keras_tape_healthy", "keras_tape_nan"):
        written = labels(trial)["written_by_hook"]
        assert list(written["modes"]) == ["TRAIN"]
        assert {"weights/dense/kernel:0", "gradients/dense/kernelGrad", "loss"} <= set(
            written["tensor_names"]
        )


def test_xgboost_multiclass_and_regression_metric_names() -> None:
    """multi:softprob writes <set>-mlogloss / <set>-merror, reg:squarederror <set>-rmse /
    <set>-mae, every step GLOBAL."""
    multi, reg = labels("xgboost_multiclass_healthy"), labels("xgboost_regression_healthy")
    assert {"train-mlogloss", "validation-merror"} <= set(multi["written_by_hook"]["tensor_names"])
    assert {"train-rmse", "validation-mae"} <= set(reg["written_by_hook"]["tensor_names"])
    assert list(multi["written_by_hook"]["modes"]) == ["GLOBAL"]


@pytest.mark.parametrize("trial", ["pytorch_lstm_healthy", "pytorch_transformer_healthy"])
@pytest.mark.parametrize("rule", ["DeadRelu", "SaturatedActivation"])
def test_lstm_attention_gelu_layernorm_are_no_relu_tanh_sigmoid(
    outcomes: dict[str, dict[str, Outcome]], trial: str, rule: str
) -> None:
    """An LSTM's tuple outputs (lstm_output_1/2 are h_n/c_n, not calls), attention's
    (q, k, v) -> (output, weights), GELU and LayerNorm are taken for no ReLU, tanh or
    sigmoid (their gates and softmax are inside the modules): the activation rules say they
    checked nothing rather than judge them."""
    assert outcomes[rule][trial].cell == CHECKED_NOTHING
