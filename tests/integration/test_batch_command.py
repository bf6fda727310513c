"""``rule-evaluator batch``: many trials evaluated in parallel, each job's outputs as a single run
writes them, one summary, resumable, the worst outcome's exit code (container/batch)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import RULES, comparable, live_trial, single_runs, write_fleet
from tests.support.waits import wait_until

ROOT = Path(__file__).resolve().parents[2]
FLEET = 50
KIND_CODES = {"vanishing": 1, "clean": 0, "nan": 1, "no_gradients": 2}


def batch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rule-evaluator batch ...`` as a user runs it (supervisor included)."""
    return subprocess.run(
        [sys.executable, "-m", "container.cli", "batch", *args],
        cwd=ROOT,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """50 trials in one folder and the result file of one single run per trial."""
    root = tmp_path_factory.mktemp("fleet")
    trials = write_fleet(root / "trials", FLEET)
    singles = single_runs([(t.name, str(t.path)) for t in trials], root / "single")
    return {"root": root, "trials": trials, "singles": singles}


def _check_against_single_runs(out: Path, fleet: dict[str, Any], done: Any) -> dict[str, Any]:
    summary = json.loads((out / "batch_summary.json").read_text())
    jobs = {job["name"]: job for job in summary["jobs"]}
    assert sorted(jobs) == sorted(t.name for t in fleet["trials"]), done.stdout + done.stderr
    for trial in fleet["trials"]:
        single = fleet["singles"][trial.name]
        job = jobs[trial.name]
        own = json.loads((out / trial.name / "rule_evaluation_result.json").read_text())
        assert comparable(own) == comparable(single), trial.name
        assert (job["status"], job["exit_code"], job["message"]) == (
            single["status"],
            single["exit_code"],
            single["message"],
        )
        assert [(r["rule"], r["status"], r["step"], r["fired_steps"]) for r in job["rules"]] == [
            (r["rule"], r["status"], r["step"], r["fired_steps"]) for r in single["rules"]
        ]
        assert single["exit_code"] == KIND_CODES[trial.kind], trial.name
        assert (out / trial.name / "rule_report.html").is_file()
        assert job["report"] == f"{trial.name}/rule_report.html"
    worst = 2  # the trials without gradients: VanishingGradient has nothing to check
    assert done.returncode == worst == summary["exit_code"], done.stdout + done.stderr
    rows = list(csv.DictReader((out / "batch_summary.csv").open()))
    assert {(r["job"], r["status"], int(r["exit_code"])) for r in rows} == {
        (j["name"], j["status"], j["exit_code"]) for j in summary["jobs"]
    }
    page = (out / "index.html").read_text()
    for trial in fleet["trials"]:
        assert f'href="{trial.name}/rule_report.html"' in page
    return summary


@pytest.mark.slow
def test_local_batch_equals_single_runs_and_resumes(fleet: dict[str, Any], tmp_path: Path) -> None:
    """A batch over a folder of 50 trials writes, per trial, what a single run writes, a
    summary equal to the 50 single runs' result files, and exits with the worst outcome; run
    again, it keeps every finished job and runs none."""
    out = tmp_path / "out"
    done = batch(str(fleet["root"] / "trials"), "--rule", RULES, "--output-dir", str(out))
    summary = _check_against_single_runs(out, fleet, done)
    assert "50 job(s)" in done.stdout and "exit code 2" in done.stdout
    assert not any(job["kept"] for job in summary["jobs"])
    logs = {p.name: p.stat().st_mtime_ns for p in (out / ".batch" / "logs").iterdir()}

    again = batch(str(fleet["root"] / "trials"), "--rule", RULES, "--output-dir", str(out))
    assert again.returncode == 2, again.stdout + again.stderr
    assert "50 finished earlier (kept), 0 to run" in again.stdout
    resumed = json.loads((out / "batch_summary.json").read_text())
    assert all(job["kept"] for job in resumed["jobs"])
    assert [(j["name"], j["status"], j["rules"]) for j in resumed["jobs"]] == [
        (j["name"], j["status"], j["rules"]) for j in summary["jobs"]
    ]
    assert {p.name: p.stat().st_mtime_ns for p in (out / ".batch" / "logs").iterdir()} == logs


@pytest.mark.slow
def test_s3_batch_equals_single_runs(fleet: dict[str, Any], s3_server: Any, tmp_path: Path) -> None:
    """A batch over an S3 prefix whose sub-folders are the 50 trials gives the same summary as
    the 50 single runs of the local copies."""
    bucket = s3_server.new_bucket()
    s3_server.upload_folder(fleet["root"] / "trials", bucket, "fleet")
    out = tmp_path / "out"
    done = batch(f"s3://{bucket}/fleet", "--rule", RULES, "--output-dir", str(out))
    summary = _check_against_single_runs(out, fleet, done)
    trials = {job["name"]: job["trial"] for job in summary["jobs"]}
    assert trials["job-001"] == f"s3://{bucket}/fleet/job-001/debug-output"


def test_a_crashing_job_is_that_jobs_error(tmp_path: Path) -> None:
    """A job whose evaluation process dies ends in that job's Error (exit 3, internal error),
    the other jobs finish with their verdicts, and the batch exits 3; a job that is not
    finished (the internal error) runs again in the next batch, the finished ones are kept."""
    trials = write_fleet(tmp_path / "trials", 3)
    rule = tmp_path / "rules.py"
    rule.write_text(
        "import os\n"
        "from smdebug.rules import Rule\n\n"
        "class DiesOnOne(Rule):\n"
        "    def __init__(self, base_trial, action_str=None):\n"
        "        super().__init__(base_trial, action_str)\n\n"
        "    def invoke_at_step(self, step):\n"
        "        self.base_trial.tensor('loss').value(step)\n"
        "        if 'job-002' in self.base_trial.path:\n"
        "            os._exit(9)\n"
        "        return False\n"
    )
    out = tmp_path / "out"
    args = (str(tmp_path / "trials"), "--rule", "DiesOnOne", "--source_s3_uri", str(rule))
    done = batch(*args, "--output-dir", str(out), "--jobs", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    jobs = {j["name"]: j for j in json.loads((out / "batch_summary.json").read_text())["jobs"]}
    assert [jobs[t.name]["exit_code"] for t in trials] == [0, 0, 3]
    assert jobs["job-002"]["message"].startswith("InternalServerError: ")
    again = batch(*args, "--output-dir", str(out))
    assert "2 finished earlier (kept), 1 to run" in again.stdout, again.stdout + again.stderr
    assert again.returncode == 3
    kept = json.loads((out / "batch_summary.json").read_text())["jobs"]
    assert [(j["kept"], j["seconds"] == jobs[j["name"]]["seconds"]) for j in kept[:2]] == [
        (True, True),
        (True, True),
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["t", "--rule", "VanishingGradient"], "--output-dir is required"),
        (["t", "--output-dir", "o"], "no rule to run"),
        (["--rule", "X", "--output-dir", "o"], "no trial given"),
        (["t", "--rule", "X", "--output-dir", "o", "--trial-dir", "u"], "give the trials as"),
        (["t", "--rule", "X", "--output-dir", "o", "--engine", "spark"], "pool or ray"),
        (["t", "--rule", "X", "--output-dir", "o", "--jobs", "0"], "--jobs must be"),
        (["missing-folder/", "--rule", "X", "--output-dir", "o"], "does not exist"),
    ],
)
def test_bad_requests_say_what_to_fix(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad batch request ends with exit 2 and a ClientError naming what to fix, and runs no
    job."""
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k.lower() != "rule_to_invoke"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "container.cli", "batch", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ClientError: " in done.stderr and expected in done.stderr
    assert not (tmp_path / "o" / ".batch").exists()


def _live_batch(tmp_path: Path, *, trials: int) -> tuple[subprocess.Popen[str], list[str]]:
    """Start a batch of two jobs at a time over ``trials`` live trials under
    ``tmp_path/trials`` (output in ``tmp_path/out``); return once its first two jobs have
    started evaluating (their result files say InProgress), with its arguments."""
    for i in range(trials):
        live_trial(tmp_path / "trials" / f"run-{i}")
    out = tmp_path / "out"
    args = [str(tmp_path / "trials"), "--rule", "VanishingGradient", "--output-dir", str(out)]
    args += ["--wait_for_training_end", "true", "--jobs", "2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "container.cli", "batch", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = [out / f"run-{i}" / "rule_evaluation_result.json" for i in range(2)]

    def started() -> bool:
        states = [json.loads(p.read_text()).get("status") if p.is_file() else None for p in results]
        return states == ["InProgress", "InProgress"]

    wait_until(started, timeout=120, interval=0.2)
    return process, args


def test_a_stopped_batch_stops_its_jobs_and_runs_them_next_time(tmp_path: Path) -> None:
    """SIGTERM to the batch ends its running jobs Stopped (their result files say so), lists
    the jobs it had not started as Stopped, exits 143, and the next run runs them all again."""
    import signal

    process, args = _live_batch(tmp_path, trials=3)
    out = tmp_path / "out"
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stdout + stderr
    jobs = {j["name"]: j for j in json.loads((out / "batch_summary.json").read_text())["jobs"]}
    assert {name: j["status"] for name, j in jobs.items()} == dict.fromkeys(
        ["run-0", "run-1", "run-2"], "Stopped"
    )
    for i in range(2):
        result = json.loads((out / f"run-{i}" / "rule_evaluation_result.json").read_text())
        assert result["status"] == "Stopped" and result["exit_code"] == 143
    assert not (out / "run-2").exists()
    for i in range(3):
        (tmp_path / "trials" / f"run-{i}" / "training_job_end.ts").touch()
    again = batch(*args, env={**os.environ})
    assert "0 finished earlier (kept), 3 to run" in again.stdout, again.stdout + again.stderr
    assert again.returncode == 0


def _tree(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_trial_names_never_write_outside_the_output_folder(tmp_path: Path) -> None:
    """Trials in folders named ``.batch``, ``index.html`` and ``batch_summary.json``, and one
    given as ``run-9/sub/..``, each get a folder of their own inside ``--output-dir``: the
    batch finishes, writes its summary, and nothing lands beside ``--output-dir``."""
    trials = tmp_path / "trials"
    for name in (".batch", "index.html", "batch_summary.json", "plain"):
        live_trial(trials / name)
        (trials / name / "training_job_end.ts").touch()
    live_trial(tmp_path / "other" / "run-9")
    (tmp_path / "other" / "run-9" / "training_job_end.ts").touch()
    (tmp_path / "other" / "run-9" / "sub").mkdir()
    parent = tmp_path / "parent"
    out = parent / "out"
    done = batch(
        str(trials),
        str(tmp_path / "other" / "run-9" / "sub" / ".."),
        "--rule",
        "VanishingGradient",
        "--output-dir",
        str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in parent.iterdir()] == ["out"]
    summary = json.loads((out / "batch_summary.json").read_text())
    names = sorted(j["name"] for j in summary["jobs"])
    assert names == ["_.batch", "_batch_summary.json", "_index.html", "plain", "run-9"]
    for name in names:
        result = json.loads((out / name / "rule_evaluation_result.json").read_text())
        assert result["status"] == "NoIssuesFound", name
    assert (out / "index.html").is_file() and (out / ".batch" / "logs").is_dir()
    again = batch(str(trials), "--rule", "VanishingGradient", "--output-dir", str(out))
    assert "4 finished earlier (kept), 0 to run" in again.stdout, again.stdout + again.stderr


def test_an_s3_folder_named_dot_dot_stays_inside_the_output_folder(
    s3_server: Any, tmp_path: Path
) -> None:
    """An S3 prefix with a ``../`` "folder" holding a trial: that job is named ``_..``, ends
    in its own ClientError (object keys with '..' cannot be read), writes only inside
    ``--output-dir``, and the other trial's job finishes."""
    live_trial(tmp_path / "trial")
    (tmp_path / "trial" / "training_job_end.ts").touch()
    bucket = s3_server.new_bucket()
    s3_server.upload_folder(tmp_path / "trial", bucket, "jobs/good")
    objects = {
        path.relative_to(tmp_path / "trial").as_posix(): path.read_bytes()
        for path in (tmp_path / "trial").rglob("*")
        if path.is_file()
    }
    s3_server.put_objects(bucket, objects, prefix="jobs/../")
    parent = tmp_path / "parent"
    out = parent / "out"
    done = batch(f"s3://{bucket}/jobs", "--rule", "VanishingGradient", "--output-dir", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert [p.name for p in parent.iterdir()] == ["out"]
    jobs = {j["name"]: j for j in json.loads((out / "batch_summary.json").read_text())["jobs"]}
    assert sorted(jobs) == ["_..", "good"]
    assert (jobs["good"]["status"], jobs["good"]["exit_code"]) == ("NoIssuesFound", 0)
    assert jobs["_.."]["exit_code"] == 2
    assert jobs["_.."]["message"].startswith("ClientError: ")
    assert "'..' part" in jobs["_.."]["message"]


def _processes() -> dict[int, tuple[int, list[bytes]]]:
    """Every process: its parent's pid and its command line (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            found[int(entry.name)] = (ppid, (entry / "cmdline").read_bytes().split(b"\0"))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _job_pid(batch_pid: int, trial: Path) -> int | None:
    """The pid of the batch's job process (the job's supervisor) for ``trial``: the topmost
    process below the batch whose command line names the trial."""
    processes = _processes()

    def below_batch(pid: int) -> bool:
        while pid in processes and pid > 1:
            pid = processes[pid][0]
            if pid == batch_pid:
                return True
        return False

    named = {pid for pid, (_, cmd) in processes.items() if str(trial).encode() in cmd}
    top = [p for p in named if below_batch(p) and processes[p][0] not in named]
    return top[0] if len(top) == 1 else None


def test_a_killed_job_is_its_own_error_and_the_summary_is_written(tmp_path: Path) -> None:
    """SIGKILL of one job's process: that job is an Error with exit 3 and a message saying it
    was killed (not a line of its log), its result file says so (never left InProgress), the
    other job finishes, the batch exits 3 (never -9 or 247) and writes its summary."""
    import signal

    process, _ = _live_batch(tmp_path, trials=2)
    out = tmp_path / "out"
    results = [out / f"run-{i}" / "rule_evaluation_result.json" for i in range(2)]
    pid = _job_pid(process.pid, tmp_path / "trials" / "run-0")
    assert pid is not None, "the job's process was not found"
    os.kill(pid, signal.SIGKILL)
    (tmp_path / "trials" / "run-1" / "training_job_end.ts").touch()
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, stdout + stderr
    summary = json.loads((out / "batch_summary.json").read_text())
    jobs = {j["name"]: j for j in summary["jobs"]}
    assert (jobs["run-0"]["status"], jobs["run-0"]["exit_code"]) == ("Error", 3)
    assert jobs["run-0"]["message"].startswith(
        "InternalServerError: this job's rule-evaluator process was killed by SIGKILL"
    )
    assert (jobs["run-1"]["status"], jobs["run-1"]["exit_code"]) == ("NoIssuesFound", 0)
    assert summary["exit_code"] == 3 and (out / "index.html").is_file()
    result = json.loads(results[0].read_text())
    assert (result["status"], result["exit_code"]) == ("Error", 3)
    assert [r["status"] for r in result["rules"]] == ["Error"]
    assert "killed by SIGKILL" in result["message"]


@pytest.mark.parametrize("namespace", ["on", "off"])
def test_rule_code_cannot_stop_the_batch(tmp_path: Path, namespace: str) -> None:
    """A job's rule code sends SIGTERM, SIGINT and SIGSTOP to every rule-evaluator process
    above it (its supervisor, the batch process and the batch's supervisor: by their command
    lines, never the test's own process) and their groups: every job finishes with its
    verdict, the summary is written, the batch exits 0."""
    trials = write_fleet(tmp_path / "trials", 3)
    rule = tmp_path / "rules.py"
    rule.write_text(
        "import os, signal\n"
        "from smdebug.rules import Rule\n\n"
        "def ours():\n"
        "    found, pid = [], int(os.readlink('/proc/self'))\n"
        "    while pid > 1:\n"
        "        with open(f'/proc/{pid}/stat') as f:\n"
        "            fields = f.read().rsplit(')', 1)[1].split()\n"
        "        pid = int(fields[1])\n"
        "        with open(f'/proc/{pid}/cmdline', 'rb') as f:\n"
        "            words = f.read().split(b'\\0')\n"
        "        if b'container.cli' in words or any(b'from container.' in w for w in words):\n"
        "            with open(f'/proc/{pid}/stat') as g:\n"
        "                group = int(g.read().rsplit(')', 1)[1].split()[2])\n"
        "            found += [pid, -group] if group == pid else [pid]  # (not the test's group)\n"
        "    return found\n\n"
        "class SignalsBatch(Rule):\n"
        "    def __init__(self, base_trial, action_str=None):\n"
        "        super().__init__(base_trial, action_str)\n\n"
        "    def invoke_at_step(self, step):\n"
        "        self.base_trial.tensor('loss').value(step)\n"
        "        if 'job-001' in self.base_trial.path and step == 0:\n"
        "            for target in ours():\n"
        "                for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGSTOP):\n"
        "                    try:\n"
        "                        os.kill(target, signum)\n"
        "                    except OSError:\n"
        "                        pass\n"
        "        return False\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, "EVALUATOR_PID_NAMESPACE": namespace}
    done = batch(
        str(tmp_path / "trials"),
        "--rule",
        "SignalsBatch",
        "--source_s3_uri",
        str(rule),
        "--output-dir",
        str(out),
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {j["name"]: j for j in json.loads((out / "batch_summary.json").read_text())["jobs"]}
    assert [jobs[t.name]["exit_code"] for t in trials] == [0, 0, 0]
