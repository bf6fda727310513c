"""The built-in rules that fire on no real-hook trial with their defaults (they need
parameters, images, token ids, another run or a live job) write, on a trial made for them, a
report whose recorded series holds the firing value at the firing step. With
tests/hook_trials/test_report_series.py this covers every built-in rule that can fire."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.report import write_report
from evaluator.testing import TrialWriter
from evaluator.testing.tb_writer import write_scalars
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.stalled_training_rule import StalledTrainingRule
from tests.hook_trials.test_report_series import FIRES_ON
from tests.report.firing import assert_report_holds_the_firing
from tests.report.harness import evaluate_with_report

NEVER_FIRES = {"CreateXgboostReport": "a report writer: it never fires"}


def _trial(
    root: Path,
    steps: Mapping[int, Mapping[str, object]],
    collections: list[Collection] | None = None,
    *,
    ended: bool = True,
) -> Path:
    writer = TrialWriter(root)
    writer.write_collections(collections or [])
    for step, tensors in steps.items():
        writer.write_step(step, tensors)
    if ended:
        writer.end_training()
    return root


def _fires(tmp_path: Path, rule: str, trial: Path, *argv: str) -> None:
    run = evaluate_with_report(["--trial-dir", str(trial), "--rule", rule, *argv], tmp_path / "out")
    assert run.exit_code == 1
    assert_report_holds_the_firing(run.output_dir, rule)


def test_every_built_in_rule_is_covered() -> None:
    """Each registered rule is checked here, in the hook-trial test, or never fires."""
    here = {
        "AllZero",
        "CheckInputImages",
        "LearningRateSchedule",
        "NLPSequenceRatio",
        "SimilarAcrossRuns",
        "StalledTrainingRule",
        "TensorVariance",
        "ThroughputDrop",
    }
    assert set(registry.names()) == here | set(FIRES_ON) | set(NEVER_FIRES)


def test_all_zero(tmp_path: Path) -> None:
    """AllZero (tensor_regex given) fires where a ReLU output is all zeros."""
    steps = {s: {"relu_output": np.zeros(8) if s == 2 else np.ones(8)} for s in range(4)}
    _fires(tmp_path, "AllZero", _trial(tmp_path / "t", steps), "--tensor_regex", "relu_output")


def test_tensor_variance(tmp_path: Path) -> None:
    """TensorVariance (max_threshold given) fires where a weight's variance exceeds it."""
    steps = {s: {"weights/w": np.array([0.0, 10.0 * s], np.float32)} for s in range(4)}
    trial = _trial(tmp_path / "t", steps, [Collection("weights", include_regex=["^weights/"])])
    _fires(
        tmp_path, "TensorVariance", trial, "--collection_names", "weights", "--max_threshold", "50"
    )


def test_check_input_images(tmp_path: Path) -> None:
    """CheckInputImages fires once 500 raw (unnormalised) images have been seen."""
    rng = np.random.default_rng(2)
    steps = {
        s: {"hybridsequential0_input_0": (rng.random((100, 1, 8, 8)) ** 2.45).astype(np.float32)}
        for s in range(6)
    }
    _fires(tmp_path, "CheckInputImages", _trial(tmp_path / "t", steps))


def test_nlp_sequence_ratio(tmp_path: Path) -> None:
    """NLPSequenceRatio fires where 60 % of the token ids are padding."""

    def ids(padding: int) -> np.ndarray:
        values = np.concatenate([np.zeros(padding), np.arange(5, 105 - padding)])
        return values.astype(np.int64).reshape(4, -1)

    steps = {s: {"embedding0_input_0": ids(60 if s == 1 else 10)} for s in range(3)}
    _fires(tmp_path, "NLPSequenceRatio", _trial(tmp_path / "t", steps))


def test_similar_across_runs(tmp_path: Path) -> None:
    """SimilarAcrossRuns fires where the other run's weights differ (step 3)."""
    weights = [Collection("weights", include_regex=["^weights/"])]

    def run(w: float) -> dict[int, dict[str, object]]:
        return {s: {"weights/w": np.array([s, w if s == 3 else 1.0], np.float32)} for s in range(5)}

    base = _trial(tmp_path / "base", run(1.0), weights)
    other = _trial(tmp_path / "other", run(2.0), weights)
    _fires(tmp_path, "SimilarAcrossRuns", base, "--other_trials", str(other))


def test_stalled_training_rule(tmp_path: Path) -> None:
    """StalledTrainingRule (a live job, its clock faked) fires after 60 s without a step."""
    from evaluator.rules import invoke_rule

    root = _trial(tmp_path / "t", {s: {"loss": np.float32(1.0)} for s in range(3)}, ended=False)
    now = [100.0]
    trial = create_trial(str(root))
    try:
        rule = StalledTrainingRule(trial, threshold="60")
        rule.clock = lambda: now[0]
        rule.sleep = lambda seconds: now.__setitem__(0, now[0] + seconds)
        assert invoke_rule(rule, continue_after_fire=False).fired_steps == (2,)
        out = tmp_path / "out"
        out.mkdir()
        result = {
            "rules": [
                {
                    "rule": "StalledTrainingRule",
                    "configuration_name": "StalledTrainingRule",
                    "status": "IssuesFound",
                    "fired_steps": [2],
                    "details": None,
                    "evidence": rule.evidence.summary(),
                }
            ]
        }
        (out / "rule_evaluation_result.json").write_text(json.dumps(result))
        write_report(
            out / "rule_evaluation_result.json", evidence={"StalledTrainingRule": rule.evidence}
        )
    finally:
        trial.close()
    assert_report_holds_the_firing(out, "StalledTrainingRule")


def test_learning_rate_schedule(tmp_path: Path) -> None:
    """LearningRateSchedule fires where a Hugging Face log's learning rate stays at 0."""
    lr = [(s, 1e-4 if s < 6 else 0.0) for s in range(1, 10)]
    loss = [(s, 1.0 / s) for s in range(1, 10)]
    log = tmp_path / "tb"
    write_scalars(log, {"train/loss": loss, "train/learning_rate": lr})
    _fires(tmp_path, "LearningRateSchedule", log)


def test_throughput_drop(tmp_path: Path) -> None:
    """ThroughputDrop fires where a logged evaluation throughput falls to a fifth."""
    speed = [(s, 100.0 if s < 6 else 20.0) for s in range(1, 12)]
    log = tmp_path / "tb"
    write_scalars(
        log, {"eval/samples_per_second": speed, "eval/loss": [(s, 1.0) for s in range(1, 12)]}
    )
    _fires(tmp_path, "ThroughputDrop", log)
