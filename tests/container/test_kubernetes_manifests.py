"""The Kubernetes manifests of examples/kubernetes/ work as written: the image is run with
exactly the environment, mounts and security context each manifest gives its container (read
from the YAML, so the test and the manifests cannot drift), with the test playing Kubernetes
(JOB_COMPLETION_INDEX, the ConfigMap's files, the volumes) and the training job."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.container.harness import ROOT, S3_CREDENTIALS, Docker, Image
from tests.container.kube import Manifest

pytestmark = pytest.mark.container

EXAMPLES = ROOT / "examples" / "kubernetes"
RESULT = "rule_evaluation_result.json"


def _writable(folder: Path) -> Path:
    """A host folder any container user may write (the manifests run as uid 10001)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o777)
    return folder


def _write_trial(folder: Path, *, vanish_at: int | None, steps: int = 6) -> TrialWriter:
    writer = TrialWriter(folder)
    writer.write_collections(
        [
            Collection("gradients", include_regex=["^gradients/"]),
            Collection("losses", tensor_names={"loss"}),
        ]
    )
    for step in range(steps):
        grad = np.full((3, 3), 0.5, np.float32)
        if vanish_at is not None and step >= vanish_at:
            grad *= np.float32(1e-12)
        writer.write_step(
            step, {"gradients/w": grad, "loss": np.float32(1 / (step + 1))}, mode=ModeKeys.TRAIN
        )
    return writer


def test_indexed_job_evaluates_the_trial_of_each_index(
    docker: Docker, image: Image, bridge_s3: Any, tmp_path: Path
) -> None:
    """Each index of the Indexed Job evaluates its line of the ConfigMap's trial list (on S3)
    and writes its outputs to /results/<trial name>/; exit codes are each trial's verdict."""
    manifest = Manifest(EXAMPLES / "indexed-job.yaml")
    job = manifest.job()
    container = manifest.container("evaluator")
    files = manifest.config_map("rule-evaluator-trials")
    trials = [line for line in files["trials.txt"].splitlines() if line.strip()]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == len(trials)
    # the trials, at the very S3 URIs the ConfigMap names (moto, over the Docker bridge)
    expected = {}
    made: set[str] = set()
    for i, uri in enumerate(trials):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if bucket not in made:
            bridge_s3.client().create_bucket(Bucket=bucket)
            made.add(bucket)
        vanish_at = 3 if i == 1 else None
        _write_trial(tmp_path / "trials" / str(i), vanish_at=vanish_at).end_training()
        bridge_s3.upload_folder(tmp_path / "trials" / str(i), bucket, prefix)
        expected[prefix.split("/")[-2]] = (1, [3]) if vanish_at is not None else (0, [])
    config = tmp_path / "configmap"
    config.mkdir()
    for name, text in files.items():
        (config / name).write_text(text)
    results = _writable(tmp_path / "results")
    for index in range(len(trials)):
        status = _writable(tmp_path / f"status-{index}")
        volumes = {"trials": config, "status": status, "results": results}
        cluster = {  # what the cluster gives the pod: its index, and S3 (IRSA on EKS)
            "JOB_COMPLETION_INDEX": str(index),
            "AWS_ENDPOINT_URL": bridge_s3.endpoint,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        options = container.docker_options(volumes)
        for name, value in cluster.items():
            options += ["-e", f"{name}={value}"]
        for name in S3_CREDENTIALS:
            options += ["-e", name]
        done = docker(
            "run", "--rm", *options, image.name, *container.args, check=False, env=S3_CREDENTIALS
        )
        name = trials[index].split("/")[-2]
        code, fired = expected[name]
        assert done.returncode == code, done.stdout + done.stderr
        result = json.loads((results / name / RESULT).read_text())
        assert result["trial"] == trials[index]
        assert [r["status"] for r in result["rules"]] == [
            "IssuesFound" if fired else "NoIssuesFound",
            "NoIssuesFound",
        ]
        assert result["rules"][0]["fired_steps"] == fired
        assert (results / name / "rule_report.html").is_file()
        assert S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in done.stdout + done.stderr
    assert sorted(p.name for p in results.iterdir()) == sorted(expected)


def test_sidecar_follows_the_training_and_ends_with_it(
    docker: Docker, image: Image, tmp_path: Path
) -> None:
    """The sidecar evaluator reads the shared folder while the training writes it, waits for
    the end marker, and exits with the verdict; its result file is in the results volume."""
    manifest = Manifest(EXAMPLES / "sidecar.yaml")
    evaluator = manifest.container("rule-evaluator")
    training = manifest.container("training")
    shared = _writable(tmp_path / "debug-output")
    assert any(m["name"] == "debug-output" for m in training.spec["volumeMounts"])
    assert manifest.job()["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    volumes = {
        "debug-output": shared,
        "status": _writable(tmp_path / "status"),
        "results": _writable(tmp_path / "results"),
    }
    name = f"i28-sidecar-{os.getpid()}-{int(time.time())}"
    run = docker.popen(
        "run", "--rm", "--name", name, *evaluator.docker_options(volumes), image.name
    )
    try:
        time.sleep(1.0)  # the evaluator starts before training writes anything
        writer = _write_trial(shared, vanish_at=4, steps=3)

        def finish() -> None:
            time.sleep(2.0)
            for step in range(3, 6):
                grad = np.full((3, 3), 0.5, np.float32) * np.float32(1e-12 if step >= 4 else 1)
                writer.write_step(
                    step, {"gradients/w": grad, "loss": np.float32(0.1)}, mode=ModeKeys.TRAIN
                )
            time.sleep(1.0)
            writer.end_training()

        thread = threading.Thread(target=finish)
        thread.start()
        out, _ = run.communicate(timeout=300)
        thread.join()
    finally:
        if run.poll() is None:
            docker("kill", name, check=False)
            run.wait()
    assert run.returncode == 1, out
    result = json.loads((volumes["results"] / RESULT).read_text())
    assert result["trial"] == "/debug-output"
    assert result["rules"][0]["status"] == "IssuesFound"
    assert result["rules"][0]["fired_steps"] == [4]
    assert result["rules"][1]["status"] == "NoIssuesFound"
    assert (volumes["status"] / "message").read_text().startswith("RuleEvaluationConditionMet")
