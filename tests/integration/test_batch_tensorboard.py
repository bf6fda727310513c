"""``rule-evaluator batch`` over a folder of TensorBoard runs (issue 39): each run (tensorboardX
with phase folders, Hugging Face Trainer idioms, Lightning's ``lightning_logs/version_0``,
torch's ``train/`` and ``val/``) is one job named by its path under the folder, and gets the
verdict a single run of it gives; a single run folder is a trial too; ``report`` on the
batch's folder writes each job's report again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import EvaluatorCli
from tests.support.fleet import comparable
from tests.support.tb_real_logs import RUN_FOLDERS as RUNS
from tests.support.tb_real_logs import folder_of_runs

pytest.importorskip("tensorboardX")

ROOT = Path(__file__).resolve().parents[2]
RULES = "Overfit,ExplodingTensor,LossNotDecreasing"
JOB_ARGS = ("--rule", RULES, "--poll_interval", "0.2")


def _batch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "container.cli", "batch", *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _single(tmp_path: Path, trial: Path) -> dict[str, Any]:
    run = EvaluatorCli(tmp_path)("--trial-dir", str(trial), *JOB_ARGS, timeout=300)
    assert run.result is not None, run.describe()
    return run.result


def test_each_tensorboard_run_of_a_folder_is_a_job_with_its_single_run_verdict(
    tmp_path: Path,
) -> None:
    """Four runs of four writers' layouts: four jobs named by their paths, each with the
    result file a single run of that run folder writes (verdicts, steps, messages)."""
    runs = folder_of_runs(tmp_path)
    out = tmp_path / "out"
    done = _batch(str(runs), "--output-dir", str(out), "--jobs", "2", *JOB_ARGS)
    summary = json.loads((out / "batch_summary.json").read_text())
    jobs = {j["name"]: j for j in summary["jobs"]}
    assert sorted(jobs) == sorted(RUNS.values()), done.stdout + done.stderr
    for sub_path, name in RUNS.items():
        single = _single(tmp_path / "single" / name, runs / sub_path)
        own = json.loads((out / name / "rule_evaluation_result.json").read_text())
        assert comparable(own) == comparable(single), name
        assert jobs[name]["trial"] == str(runs / sub_path)
    statuses = {n: {r["rule"]: r["status"] for r in jobs[n]["rules"]} for n in jobs}
    for name in ("hf_overfit", "lightning_overfit_lightning_logs_version_0", "torch_overfit"):
        assert statuses[name]["Overfit"] == "IssuesFound", (name, statuses[name])
    assert statuses["tbx_nan"]["ExplodingTensor"] == "IssuesFound"
    assert done.returncode == 1, done.stdout + done.stderr
    _report_of_the_batch(out)


def _report_of_the_batch(out: Path) -> None:
    """``rule-evaluator report`` on the batch's folder writes each job's report again."""
    for name in RUNS.values():
        (out / name / "rule_report.html").unlink()
    again = subprocess.run(
        [sys.executable, "-m", "container.cli", "report", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    written = sorted(Path(line).parent.name for line in again.stdout.splitlines())
    assert written == sorted(RUNS.values())
    assert all((out / name / "rule_report.html").is_file() for name in RUNS.values())


def test_a_single_tensorboard_run_is_a_batch_trial(tmp_path: Path) -> None:
    """A run folder given as a trial (phase folders inside) is one job named after it."""
    runs = folder_of_runs(tmp_path)
    out = tmp_path / "out"
    done = _batch(str(runs / "tbx_nan"), "--output-dir", str(out), *JOB_ARGS)
    assert done.returncode == 1, done.stdout + done.stderr
    [job] = json.loads((out / "batch_summary.json").read_text())["jobs"]
    assert (job["name"], job["status"]) == ("tbx_nan", "IssuesFound")


def test_a_folder_without_trials_or_runs_names_both(tmp_path: Path) -> None:
    """A folder holding neither smdebug output nor event files is refused, and the message
    names both kinds the batch looks for."""
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    done = _batch(str(tmp_path / "empty"), "--output-dir", str(tmp_path / "out"), *JOB_ARGS)
    assert done.returncode == 2
    assert "collections/ or index/" in done.stderr and "events.out.tfevents" in done.stderr
