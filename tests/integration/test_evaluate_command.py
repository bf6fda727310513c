"""The evaluator command end to end: real subprocesses, real trials on disk and on moto S3."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.compat.golden import DATA

ROOT = Path(__file__).resolve().parents[2]
FIRED = (
    "RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} "
    "resulted in the condition being met\n"
)

# A rule written for smdebug: smdebug imports, string parameters, the docs' super() form.
CUSTOM_RULE = textwrap.dedent("""
    import numpy as np
    from smdebug.rules import Rule
    from smdebug import modes
    from smdebug.exceptions import TensorUnavailableForStep

    class GradientTooSmall(Rule):
        def __init__(self, base_trial, threshold="0.001"):
            super().__init__(base_trial)          # AWS's examples: no action_str
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                try:
                    value = self.base_trial.tensor(name).value(step, mode=modes.TRAIN)
                except TensorUnavailableForStep:
                    continue
                if np.mean(np.abs(value)) < self.threshold:
                    return True
            return False

    class LossIsNaN(Rule):
        def __init__(self, base_trial, action_str, other_trials=None):
            super().__init__(base_trial, action_str, other_trials)   # smdebug's own form

        def invoke_at_step(self, step):
            return bool(np.isnan(self.base_trial.tensor("loss").value(step)).any())
""")


class Run:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.out = tmp / "out"
        self.opt_ml = tmp / "opt_ml"
        (self.opt_ml / "output").mkdir(parents=True)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k.startswith("AWS_") or k == "PATH"}
        return {**keep, "EVALUATOR_OPT_ML": str(self.opt_ml), **(extra or {})}

    def __call__(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "container.cli", "--output-dir", str(self.out), *args]
        return subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, env=self.env(env), timeout=timeout
        )

    def statuses(self, stdout: str) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("event") == "rule_status"]

    def result(self) -> dict[str, Any]:
        return json.loads((self.out / "rule_evaluation_result.json").read_text())

    def message(self) -> str | None:
        path = self.opt_ml / "output" / "message"
        return path.read_text() if path.exists() else None


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_rule_that_fires_reports_issues_found(run: Run) -> None:
    """A built-in rule that fires: IssuesFound, exit 1, SageMaker's exact message text."""
    result = run("--trial-dir", str(DATA / "vanishing"), "--rule-name", "VanishingGradient")
    assert result.returncode == 1, result.stderr
    expected = FIRED.format(rule="VanishingGradient", step=8)
    assert run.message() == expected
    assert (run.opt_ml / "output" / "failure").read_text() == expected
    statuses = run.statuses(result.stdout)
    assert [s["status"] for s in statuses] == ["InProgress", "IssuesFound"]
    document = run.result()
    assert (
        document["status"] == "IssuesFound" and document["step"] == 8 and document["exit_code"] == 1
    )


def test_healthy_trial_reports_no_issues(run: Run) -> None:
    """A healthy trial: NoIssuesFound, exit 0, no message file."""
    result = run("--trial-dir", str(DATA / "healthy"), "--rule", "VanishingGradient")
    assert result.returncode == 0, result.stderr
    assert run.message() is None
    assert run.statuses(result.stdout)[-1]["status"] == "NoIssuesFound"
    assert run.result()["status"] == "NoIssuesFound"


def test_sagemaker_style_parameters_from_processing_config(run: Run) -> None:
    """RuleParameters arrive in processingjobconfig.json's Environment, as on SageMaker."""
    config = run.opt_ml / "config" / "processingjobconfig.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps(
            {
                "ProcessingJobName": "rule-job",
                "Environment": {
                    "rule_to_invoke": "VanishingGradient",
                    "threshold": "0.0000000001",
                    "base_trial": str(DATA / "vanishing"),
                },
            }
        )
    )
    result = run()
    assert result.returncode == 0, result.stdout + result.stderr  # the lower threshold holds


def test_custom_smdebug_rule_from_a_local_file(run: Run, tmp_path: Path) -> None:
    """A user's rule written for smdebug runs unchanged from a local .py file."""
    rule = tmp_path / "my_rules.py"
    rule.write_text(CUSTOM_RULE)
    result = run(
        env={
            "base_trial": str(DATA / "vanishing"),
            "source_s3_uri": str(rule),
            "rule_to_invoke": "GradientTooSmall",
            "threshold": "0.00001",
        }
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.message() == FIRED.format(rule="GradientTooSmall", step=8)


def test_custom_rule_with_smdebug_constructor_and_action_str(run: Run, tmp_path: Path) -> None:
    """``super().__init__(base_trial, action_str, other_trials)`` works too; file:// URL form."""
    rule = tmp_path / "my_rules.py"
    rule.write_text(CUSTOM_RULE)
    result = run(
        "--trial-dir",
        str(DATA / "exploding"),
        "--rule_to_invoke",
        "LossIsNaN",
        f"--source_s3_uri=file://{rule}",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.message() == FIRED.format(rule="LossIsNaN", step=7)


@pytest.mark.parametrize("layout", ["object", "prefix"])
def test_custom_rule_from_s3(
    run: Run, tmp_path: Path, s3_server: Any, s3_bucket: str, layout: str
) -> None:
    """A rule on S3 (moto server), as a .py object or a prefix with a helper module."""
    if layout == "object":
        s3_server.put_objects(s3_bucket, {"rules/my_rules.py": CUSTOM_RULE.encode()})
        source = f"s3://{s3_bucket}/rules/my_rules.py"
    else:
        helper = "THRESHOLD_SCALE = 1.0\n"
        code = CUSTOM_RULE.replace(
            "import numpy as np", "import numpy as np\nfrom helpers import THRESHOLD_SCALE"
        )
        s3_server.put_objects(
            s3_bucket, {"pkg/my_rules.py": code.encode(), "pkg/helpers.py": helper.encode()}
        )
        source = f"s3://{s3_bucket}/pkg/"
    trial = s3_server.upload_folder(DATA / "vanishing", s3_bucket, "job/debug-output")
    result = run(
        env={
            "base_trial": trial,
            "source_s3_uri": source,
            "rule_to_invoke": "GradientTooSmall",
            "threshold": "0.00001",
        }
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.message() == FIRED.format(rule="GradientTooSmall", step=8)


def test_two_rules_in_one_run_report_two_statuses(run: Run, tmp_path: Path) -> None:
    """Two rules share one trial; each gets its status; the exit code is the most severe."""
    rule = tmp_path / "my_rules.py"
    rule.write_text(CUSTOM_RULE)
    config = tmp_path / "rules.json"
    config.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "RuleConfigurationName": "Vanishing",
                        "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                    },
                    {
                        "RuleConfigurationName": "NaNLoss",
                        "RuleParameters": {
                            "rule_to_invoke": "LossIsNaN",
                            "source_s3_uri": str(rule),
                        },
                    },
                ]
            }
        )
    )
    result = run("--trial-dir", str(DATA / "healthy"), "--config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    final = {
        s["rule"]: s["status"] for s in run.statuses(result.stdout) if s["status"] != "InProgress"
    }
    assert final == {"Vanishing": "NoIssuesFound", "NaNLoss": "NoIssuesFound"}
    assert [r["configuration_name"] for r in run.result()["rules"]] == ["Vanishing", "NaNLoss"]


def test_continue_after_fire_reports_every_firing_step(run: Run) -> None:
    """With continue_after_fire the rule keeps going and every firing step is listed."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient",
        "--continue_after_fire",
        "true",
    )
    assert result.returncode == 1
    assert run.result()["fired_steps"] == [8, 9, 10, 11, 12, 13, 14, 15]


def test_sigterm_mid_run_stops_within_seconds(run: Run, tmp_path: Path) -> None:
    """SIGTERM while the rule waits for a live trial: Stopped, exit 143, within 5 s."""
    trial = tmp_path / "live"
    writer = TrialWriter(trial)
    writer.write_collections([Collection("gradients", include_regex=["^g"])])
    for step in range(3):
        writer.write_step(step, {"g": np.ones(4, np.float32)}, mode=ModeKeys.TRAIN)
    command = [
        sys.executable,
        "-m",
        "container.cli",
        "--output-dir",
        str(run.out),
        "--trial-dir",
        str(trial),
        "--rule",
        "VanishingGradient",
        "--wait_for_training_end",
        "true",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=run.env()
    )
    try:
        assert process.stdout is not None
        seen: list[str] = []
        for line in process.stdout:  # ends at EOF if the process dies early
            seen.append(line)
            if '"status": "InProgress"' in line:
                break
        time.sleep(1.5)  # the rule evaluates steps 0-2, then waits for step 3
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        rest, stderr = process.communicate(timeout=10)
        elapsed = time.monotonic() - sent
        stdout = "".join(seen) + rest
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    assert elapsed < 5
    assert run.message() == "Stopped"
    assert run.result()["status"] == "Stopped"
    assert run.statuses(stdout)[-1]["status"] == "Stopped"


def test_trial_and_output_are_left_as_expected(run: Run, tmp_path: Path) -> None:
    """The trial is only read; the output folder holds the result file and the report, and
    nothing else, not even in .sagemaker-ignore."""
    trial = tmp_path / "trial"
    shutil.copytree(DATA / "vanishing", trial)
    before = {p: p.stat().st_mtime_ns for p in trial.rglob("*")}
    run("--trial-dir", str(trial), "--rule", "VanishingGradient")
    assert {p: p.stat().st_mtime_ns for p in trial.rglob("*")} == before
    kept = {"rule_evaluation_result.json", "rule_report.html", "rule_report_data.json"}
    leftovers = [p for p in run.out.rglob("*") if p.is_file() and p.name not in kept]
    assert leftovers == []
    assert sorted(p.name for p in run.out.iterdir() if p.is_file()) == sorted(kept)


# ---- rule parameters: checked, routed per rule, recorded with their defaults


def rule_results(run: Run) -> dict[str, dict[str, Any]]:
    return {r["configuration_name"]: r for r in run.result()["rules"]}


def test_misspelt_parameter_ends_in_client_error(run: Run) -> None:
    """--treshold 1e-12 is not silently ignored: exit 2, ClientError suggesting threshold."""
    result = run(
        "--trial-dir", str(DATA / "vanishing"), "--rule", "VanishingGradient", "--treshold", "1e-12"
    )
    assert result.returncode == 2, result.stdout + result.stderr
    message = run.message() or ""
    assert message.startswith(
        "ClientError: unknown parameter 'treshold' for rule "
        "VanishingGradient: did you mean 'threshold'?"
    ), message
    assert run.result()["rules"][0]["status"] == "Error"


def test_rule_flag_changes_only_its_rule(run: Run) -> None:
    """--VanishingGradient.threshold 1e-12 holds VanishingGradient (no firing, exit 0) and
    gives ExplodingTensor nothing."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient,ExplodingTensor",
        "--VanishingGradient.threshold",
        "1e-12",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rules = rule_results(run)
    assert rules["VanishingGradient"]["parameters"] == {"threshold": "1e-12"}
    assert "threshold" not in rules["ExplodingTensor"]["parameters"]


def test_parameter_one_rule_takes_reaches_only_it(run: Run) -> None:
    """A plain --only_nan with two rules goes to ExplodingTensor alone; the run succeeds."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient,ExplodingTensor",
        "--only_nan",
        "true",
    )
    assert result.returncode == 1, result.stdout + result.stderr  # VanishingGradient fires
    rules = rule_results(run)
    assert rules["ExplodingTensor"]["parameters"]["only_nan"] == "true"
    assert "only_nan" not in rules["VanishingGradient"]["parameters"]


def test_parameter_no_rule_takes_fails_every_rule(run: Run) -> None:
    """A parameter neither rule takes: exit 2, each rule's entry says why."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient,ExplodingTensor",
        "--treshold",
        "1e-12",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    for rule in rule_results(run).values():
        assert rule["status"] == "Error"
        assert "unknown parameter 'treshold': no rule of this run takes it" in rule["details"]


def test_result_records_effective_parameters_with_defaults(run: Run) -> None:
    """The result file lists every parameter with its effective value, defaults included."""
    result = run("--trial-dir", str(DATA / "vanishing"), "--rule", "VanishingGradient")
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.result()["parameters"] == {"threshold": "0.0000001"}


def test_result_masks_secret_parameters(run: Run, tmp_path: Path) -> None:
    """A secret-looking parameter of a user's rule is masked, given or defaulted."""
    rule = tmp_path / "my_rules.py"
    rule.write_text(
        CUSTOM_RULE.replace('threshold="0.001"', 'threshold="0.001", webhook_token=None')
    )
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "GradientTooSmall",
        "--source_s3_uri",
        str(rule),
        "--webhook_token",
        "s3cr3t",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.result()["parameters"] == {"threshold": "0.001", "webhook_token": "***"}
    assert "s3cr3t" not in (run.out / "rule_evaluation_result.json").read_text()


def test_environment_fallback_never_errors(run: Run) -> None:
    """Lower-case variables outside the processing config only fill named arguments: an
    unrelated one is no error, and threshold reaches the rule that takes it."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient,ExplodingTensor",
        env={"threshold": "1e-12", "unrelated_var": "x"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert rule_results(run)["VanishingGradient"]["parameters"] == {"threshold": "1e-12"}


def test_upper_case_processing_config_keys_are_ignored(run: Run) -> None:
    """SageMaker's own ALL-CAPS variables in the processing Environment are not parameters."""
    config = run.opt_ml / "config" / "processingjobconfig.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps(
            {
                "ProcessingJobName": "rule-job",
                "Environment": {
                    "rule_to_invoke": "VanishingGradient",
                    "threshold": "1e-12",
                    "AWS_REGION": "eu-west-1",
                    "SAGEMAKER_INTERNAL_FLAG": "1",
                    "base_trial": str(DATA / "vanishing"),
                },
            }
        )
    )
    result = run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert run.result()["parameters"] == {"threshold": "1e-12"}


def test_rule_flag_the_rule_does_not_take_fails_only_that_rule(run: Run) -> None:
    """--VanishingGradient.only_nan fails VanishingGradient (exit 2) although ExplodingTensor
    takes only_nan; ExplodingTensor still runs."""
    result = run(
        "--trial-dir",
        str(DATA / "vanishing"),
        "--rule",
        "VanishingGradient,ExplodingTensor",
        "--VanishingGradient.only_nan",
        "true",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    rules = rule_results(run)
    assert rules["VanishingGradient"]["details"].startswith(
        "ClientError: unknown parameter 'only_nan' for rule VanishingGradient."
    )
    assert rules["ExplodingTensor"]["status"] == "NoIssuesFound"
