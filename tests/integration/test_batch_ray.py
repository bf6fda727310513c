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


@pytest.mark.slow
def test_ray_batch_over_a_folder_of_tensorboard_runs_equals_the_pool(
    cluster: str, tmp_path: Path
) -> None:
    """A folder of TensorBoard runs (Hugging Face, Lightning, torch, tensorboardX layouts) on
    Ray: the jobs the pool runs, named by their paths, with the pool's result files."""
    from tests.support.tb_real_logs import RUN_FOLDERS, folder_of_runs

    runs = folder_of_runs(tmp_path)
    found = {}
    for engine in ("pool", "ray"):
        out = tmp_path / engine
        command = [sys.executable, "-m", "container.cli", "batch", str(runs), "--rule"]
        command += ["Overfit,ExplodingTensor", "--output-dir", str(out), "--engine", engine]
        command += ["--ray-address", cluster] if engine == "ray" else []
        done = subprocess.run(
            command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 1, done.stdout + done.stderr
        found[engine] = {
            name: comparable(json.loads((out / name / "rule_evaluation_result.json").read_text()))
            for name in RUN_FOLDERS.values()
        }
    assert found["ray"] == found["pool"]


LEAKY_RULE = '''
import os
from pathlib import Path

from smdebug.rules import Rule


class Leaky(Rule):
    """Writes beside its output folder (the node's temporary folder) and links a file there
    from inside its folder: none of it may come back to the batch's output."""

    def __init__(self, base_trial, output_dir=None, action_str=None):
        super().__init__(base_trial, action_str)
        here = Path(output_dir)
        (here.parent / "credentials").write_text("node secret")
        (here.parent / "stolen.txt").write_text("another job's file")
        os.symlink(here.parent / "credentials", here / "creds-link")
        (here / "own.txt").write_text("mine")

    def invoke_at_step(self, step):
        self.base_trial.tensor("gradients/w").value(step)
        return False
'''


@pytest.mark.slow
def test_ray_copies_back_only_the_jobs_own_folder(cluster: str, tmp_path: Path) -> None:
    """On Ray, a job's files come back from its own folder only: a file its rule code wrote
    beside that folder on the node, and a link to one, never reach the output; trial folders
    named ``.batch`` and ``index.html`` get folders of their own; the summary is written."""
    from tests.support.fleet import live_trial

    for name in (".batch", "index.html"):
        live_trial(tmp_path / "trials" / name)
        (tmp_path / "trials" / name / "training_job_end.ts").touch()
    rule = tmp_path / "leaky.py"
    rule.write_text(LEAKY_RULE)
    parent = tmp_path / "parent"
    out = parent / "out"
    command = [sys.executable, "-m", "container.cli", "batch", str(tmp_path / "trials")]
    command += ["--rule", "Leaky", "--source_s3_uri", str(rule), "--output-dir", str(out)]
    command += ["--engine", "ray", "--ray-address", cluster]
    done = subprocess.run(
        command, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in parent.iterdir()] == ["out"]
    everything = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert not [p for p in everything if "credentials" in p or "stolen" in p or "link" in p]
    assert not [p for p in out.rglob("*") if p.is_symlink()]
    for name in ("_.batch", "_index.html"):
        assert (out / name / "own.txt").read_text() == "mine"
        assert (
            json.loads((out / name / "rule_evaluation_result.json").read_text())["exit_code"] == 0
        )
    jobs = json.loads((out / "batch_summary.json").read_text())["jobs"]
    assert sorted(j["name"] for j in jobs) == ["_.batch", "_index.html"]
    assert (out / "index.html").is_file()
