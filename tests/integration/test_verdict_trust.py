"""Verdicts a user can trust, end to end through the command: a rule that checked nothing never
says NoIssuesFound (exit 2 instead), and every verdict says why in the result file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.support.evaluator_cli import ROOT, EvaluatorCli

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")
HOOK_TRIALS = ROOT / "tests" / "fixtures" / "hook_trials"
NOTHING = "ClientError: Insufficient information to invoke rule"


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    return EvaluatorCli(tmp_path)


def rule_entry(run: Any) -> dict[str, Any]:
    (entry,) = run.result["rules"]
    return entry


def test_a_regex_that_matches_nothing_is_an_error(cli: EvaluatorCli) -> None:
    """DeadRelu with a tensor_regex matching no tensor ends in Error, exit 2, naming it."""
    run = cli("--trial-dir", EXAMPLE, "--rule", "DeadRelu", "--tensor_regex", "no_such_tensor")
    assert run.returncode == 2, run.describe()
    entry = rule_entry(run)
    assert entry["status"] == "Error"
    assert entry["error_type"] == "InsufficientInformationForRuleInvocation"
    assert entry["details"].startswith(NOTHING + " DeadRelu")
    assert "tensor_regex 'no_such_tensor'" in entry["details"]
    assert "gradients (3)" in entry["details"]
    assert run.message.startswith(NOTHING)


def test_an_empty_collection_is_an_error(cli: EvaluatorCli) -> None:
    """ExplodingTensor on the trial's empty biases collection checked nothing: exit 2."""
    run = cli("--trial-dir", EXAMPLE, "--rule", "ExplodingTensor", "--collection_names", "biases")
    assert run.returncode == 2, run.describe()
    assert "collection_names 'biases'" in rule_entry(run)["details"]


@pytest.mark.parametrize(
    "rule", ["TreeDepth", "FeatureImportanceOverweight", "CreateXgboostReport"]
)
def test_xgboost_rules_on_a_deep_learning_trial_are_an_error(cli: EvaluatorCli, rule: str) -> None:
    """XGBoost-only rules on a trial written by PyTorch's hook say they checked nothing."""
    run = cli("--trial-dir", str(HOOK_TRIALS / "pytorch_healthy"), "--rule", rule)
    assert run.returncode == 2, run.describe()
    assert rule_entry(run)["error_type"] == "InsufficientInformationForRuleInvocation"
    assert "XGBoost" in rule_entry(run)["details"]


def test_a_live_trial_that_ends_without_the_tensors_is_an_error(
    cli: EvaluatorCli, tmp_path: Path
) -> None:
    """A rule waiting on a live trial says it has checked nothing yet, decides only when the
    trial ends, and then ends in Error (exit 2), not NoIssuesFound."""
    trial = tmp_path / "live"
    writer = TrialWriter(trial)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    invocation = cli.command(
        "--trial-dir",
        str(trial),
        "--rule",
        "DeadRelu",
        "--wait_for_training_end",
        "true",
        "--poll_interval",
        "0.2",
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "container.cli",
            *invocation.args,
            "--output-dir",
            str(invocation.output_dir),
        ],
        cwd=ROOT,
        env=dict(invocation.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for step in range(8):
            writer.write_step(step, {"loss": np.float32(1.0 / (step + 1))}, mode=ModeKeys.TRAIN)
            time.sleep(0.3)
        time.sleep(1.0)
        assert process.poll() is None, "the rule decided before the trial ended"
        writer.end_training()
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, stdout + stderr
    assert "has checked no tensor yet" in stdout
    result = (invocation.output_dir / "rule_evaluation_result.json").read_text()
    assert "InsufficientInformationForRuleInvocation" in result


def test_a_firing_says_tensor_value_threshold_mode_and_step(cli: EvaluatorCli) -> None:
    """DeadRelu on the real Keras dead-ReLU trial: the result file names why it fired."""
    run = cli("--trial-dir", str(HOOK_TRIALS / "keras_dead_relu"), "--rule", "DeadRelu")
    assert run.returncode == 1, run.describe()
    result = run.result
    reason = result["evidence"]["reasons"][0]
    assert reason["step"] == result["step"] == 0
    assert (reason["mode"], reason["mode_step"], reason["worker"]) == ("TRAIN", 0, "worker_0")
    assert reason["tensors"][0].endswith("/outputs")
    assert reason["quantity"] == "dead units (%)" and reason["value"] > 50
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold_layer",
        50.0,
        ">",
    )
    assert reason["sentence"].startswith("DeadRelu: ")
    assert result["parameters"]["threshold_layer"] == "50.0"
    fired = [line for line in run.log_lines if line.get("event") == "rule_fired"]
    assert fired[0]["reasons"][0] == reason["sentence"]


def test_no_issues_found_says_what_was_checked_and_how_close(cli: EvaluatorCli) -> None:
    """DeadRelu on the healthy Keras trial: counts of what was checked and the closest value."""
    run = cli("--trial-dir", str(HOOK_TRIALS / "keras_healthy"), "--rule", "DeadRelu")
    assert run.returncode == 0, run.describe()
    evidence = run.result["evidence"]
    assert evidence["tensors_checked"] >= 3 and evidence["steps_checked"] > 1
    assert evidence["reasons"] == [] and evidence["firings"] == 0
    (closest,) = evidence["closest"]
    assert closest["parameter"] == "threshold_layer" and closest["value"] < 50
    assert closest["tensors"] and closest["step"] is not None


def test_one_rule_that_checked_nothing_makes_the_run_exit_2(cli: EvaluatorCli) -> None:
    """Two rules, one quiet and one with nothing to check: the run exits 2, each says why."""
    run = cli(
        "--trial-dir", str(HOOK_TRIALS / "keras_healthy"), "--rule", "ExplodingTensor,TreeDepth"
    )
    assert run.returncode == 2, run.describe()
    statuses = {r["rule"]: r["status"] for r in run.result["rules"]}
    assert statuses == {"ExplodingTensor": "NoIssuesFound", "TreeDepth": "Error"}


def test_an_end_of_data_judgement_fires_at_the_judged_step(cli: EvaluatorCli) -> None:
    """Confusion judges the trained model when the data ends: it fires at the newest step with
    labels and predictions, and that step is not counted twice."""
    trial = HOOK_TRIALS / "xgboost_imbalanced"
    steps = sorted(int(p.stem.split("_")[0]) for p in (trial / "index").rglob("*.json"))
    run = cli("--trial-dir", str(trial), "--rule", "Confusion")
    assert run.returncode == 1, run.describe()
    entry = rule_entry(run)
    assert entry["step"] == steps[-1] and entry["fired_steps"] == [steps[-1]]
    assert entry["steps_evaluated"] == len(steps)
    assert entry["evidence"]["reasons"][0]["step"] == steps[-1]
