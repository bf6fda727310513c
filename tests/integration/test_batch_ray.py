"""``rule-evaluator batch --engine ray``: the jobs run as tasks of a Ray cluster (here a local
one the test starts with two CPUs), reached by its address as a real cluster would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fleet import RULES, comparable, single_runs, write_fleet

ray = pytest.importorskip("ray", reason="Ray is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray cluster with two CPUs; its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_batch_equals_single_runs(cluster: str, tmp_path: Path) -> None:
    """A batch on the Ray cluster at ``--ray-address`` writes each job's result file and report
    under the output folder (returned by the tasks), a summary equal to the single runs, and
    exits with the worst outcome; run again, it keeps the finished jobs."""
    trials = write_fleet(tmp_path / "trials", TRIALS)
    singles = single_runs([(t.name, str(t.path)) for t in trials], tmp_path / "single")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "container.cli", "batch", str(tmp_path / "trials")]
    command += ["--rule", RULES, "--output-dir", str(out), "--engine", "ray"]
    command += ["--ray-address", cluster]
    done = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "on ray" in done.stdout
    summary = json.loads((out / "batch_summary.json").read_text())
    assert summary["engine"] == "ray"
    jobs = {job["name"]: job for job in summary["jobs"]}
    for trial in trials:
        own = json.loads((out / trial.name / "rule_evaluation_result.json").read_text())
        assert comparable(own) == comparable(singles[trial.name]), trial.name
        assert jobs[trial.name]["status"] == singles[trial.name]["status"]
        assert jobs[trial.name]["report"] == f"{trial.name}/rule_report.html"
        assert (out / trial.name / "rule_report.html").is_file()
        assert (out / ".batch" / "logs" / f"{trial.name}.log").is_file()
    again = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900
    )
    assert f"{TRIALS} finished earlier (kept), 0 to run" in again.stdout, again.stderr
    assert again.returncode == 2
