"""`docker run` of the image gives what the plain `rule-evaluator` command gives: the same exit
code, message and failure files, result file and statuses, for a mounted trial, a SageMaker
processing config, a custom rule, an S3 trial, a read-only root file system and any user; and
`docker stop` ends a run as Stopped within seconds."""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.compat.golden import DATA
from tests.container.harness import (
    S3_CREDENTIALS,
    Docker,
    Image,
    Layout,
    Outcome,
    comparable,
    live_trial,
    run_plain,
)

pytestmark = pytest.mark.container

FIRED = (
    "RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} "
    "resulted in the condition being met\n"
)
CUSTOM_RULE = textwrap.dedent("""
    import numpy as np
    from smdebug.rules import Rule
    from smdebug import modes

    class GradientTooSmall(Rule):
        def __init__(self, base_trial, threshold="0.001"):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                value = self.base_trial.tensor(name).value(step, mode=modes.TRAIN)
                if np.mean(np.abs(value)) < self.threshold:
                    return True
            return False
""")
# No writable /tmp either: nothing but the mounted folders may be written.
HARDENED = ["--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def assert_same(container: Outcome, plain: Outcome) -> None:
    """Exit code, message and failure files, result file and status sequence all agree."""
    context = f"container:\n{container.describe()}\n\nplain command:\n{plain.describe()}"
    assert container.returncode == plain.returncode, context
    assert container.message == plain.message, context
    assert container.failure == plain.failure, context
    assert container.result is not None, context
    assert comparable(container.result, container.layout) == comparable(
        plain.result, plain.layout
    ), context
    assert container.statuses() == plain.statuses(), context


def both(
    docker: Docker,
    image: Image,
    tmp_path: Path,
    trial: Path,
    env: dict[str, str],
    options: list[str] | None = None,
) -> tuple[Outcome, Outcome]:
    """The image and the plain command on the same trial (at /opt/ml/processing/input/tensors)
    with the same parameters as environment variables."""
    layouts = []
    for name in ("container", "plain"):
        layout = Layout(tmp_path / name)
        layout.mount_tensors(trial)
        layouts.append(layout)
    container = docker.run(image.name, layouts[0], env=env, options=options or [])
    return container, run_plain(layouts[1], env=env)


@pytest.mark.parametrize(
    ("trial", "env", "code", "status"),
    [
        ("vanishing", {"rule_to_invoke": "VanishingGradient"}, 1, "IssuesFound"),
        (
            "healthy",
            {"rule_to_invoke": "VanishingGradient", "threshold": "0.0000001"},
            0,
            "NoIssuesFound",
        ),
        ("vanishing", {"rule_to_invoke": "NoSuchRule"}, 2, "Error"),
    ],
    ids=["issues-found", "no-issues", "client-error"],
)
def test_mounted_trial_with_environment_parameters(
    docker: Docker,
    image: Image,
    tmp_path: Path,
    trial: str,
    env: dict[str, str],
    code: int,
    status: str,
) -> None:
    """A trial mounted at /opt/ml/processing/input/tensors, parameters as -e: same outcome as
    the plain command, for each exit code."""
    container, plain = both(docker, image, tmp_path, DATA / trial, env)
    assert_same(container, plain)
    assert container.returncode == code
    assert container.result is not None and container.result["status"] == status
    if code == 1:
        assert container.message == FIRED.format(rule="VanishingGradient", step=8)


def test_parameters_from_the_processing_job_config(
    docker: Docker, image: Image, tmp_path: Path
) -> None:
    """RuleParameters in /opt/ml/config/processingjobconfig.json, as SageMaker passes them."""
    outcomes = []
    for name in ("container", "plain"):
        layout = Layout(tmp_path / name)
        layout.mount_tensors(DATA / "vanishing")
        config = layout.opt_ml / "config"
        config.mkdir()
        (config / "processingjobconfig.json").write_text(
            json.dumps(
                {
                    "ProcessingJobName": "rule-job",
                    "Environment": {
                        "rule_to_invoke": "VanishingGradient",
                        "threshold": "0.0000000001",
                    },
                }
            )
        )
        outcomes.append(
            docker.run(image.name, layout) if name == "container" else run_plain(layout, env={})
        )
    assert_same(*outcomes)
    assert outcomes[0].returncode == 0, outcomes[0].describe()  # the lower threshold holds


def test_custom_rule_file_mounted_and_named_by_source_s3_uri(
    docker: Docker, image: Image, tmp_path: Path
) -> None:
    """A user's smdebug rule in a mounted .py file, named by source_s3_uri."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "my_rules.py").write_text(CUSTOM_RULE)
    env = {
        "rule_to_invoke": "GradientTooSmall",
        "threshold": "0.00001",
        "source_s3_uri": "/rules/my_rules.py",
    }
    outcomes = []
    for name in ("container", "plain"):
        layout = Layout(tmp_path / name)
        layout.mount_tensors(DATA / "vanishing")
        layout.mounts[rules] = "/rules"
        outcomes.append(
            docker.run(image.name, layout, env=env)
            if name == "container"
            else run_plain(layout, env=env)
        )
    assert_same(*outcomes)
    assert outcomes[0].returncode == 1
    assert outcomes[0].message == FIRED.format(rule="GradientTooSmall", step=8)


@pytest.mark.parametrize("rule", ["built-in", "custom-on-s3-read-only"])
def test_s3_trial_on_a_moto_server_on_the_host(
    docker: Docker, image: Image, tmp_path: Path, bridge_s3: Any, rule: str
) -> None:
    """A trial on S3 (moto on the host, reached over the Docker bridge), endpoint and
    credentials passed in: same result as the plain command, for a built-in rule and for a rule
    whose code is on S3 too (downloaded in a read-only container); no secret in the output."""
    bucket = bridge_s3.new_bucket()
    trial = bridge_s3.upload_folder(DATA / "vanishing", bucket, "job/debug-output")
    env = {
        "base_trial": trial,
        "AWS_ENDPOINT_URL": bridge_s3.endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    options: list[str] = []
    if rule == "built-in":
        env["rule_to_invoke"] = "VanishingGradient"
    else:
        bridge_s3.put_objects(bucket, {"rules/my_rules.py": CUSTOM_RULE.encode()})
        env.update(
            rule_to_invoke="GradientTooSmall",
            threshold="0.00001",
            source_s3_uri=f"s3://{bucket}/rules/my_rules.py",
        )
        options = HARDENED
    container_layout, plain_layout = Layout(tmp_path / "container"), Layout(tmp_path / "plain")
    container = docker.run(
        image.name,
        container_layout,
        env=env,
        options=options,
        pass_env=list(S3_CREDENTIALS),
        secrets=S3_CREDENTIALS,
    )
    plain = run_plain(plain_layout, env={**env, **S3_CREDENTIALS})
    assert_same(container, plain)
    assert container.returncode == 1 and container.result is not None
    assert container.result["trial"] == trial
    everything = container.stdout + container.stderr + json.dumps(container.result)
    assert S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in everything


@pytest.mark.parametrize("user", [None, "54321:54321"], ids=["image-user", "arbitrary-uid"])
def test_read_only_root_file_system_and_non_root_user(
    docker: Docker, image: Image, tmp_path: Path, user: str | None
) -> None:
    """--read-only without even a writable /tmp, no capabilities, the image's user (root
    without the capabilities to switch users) or any other uid: same outcome as the plain
    command."""
    options = HARDENED + (["--user", user] if user else [])
    container, plain = both(
        docker,
        image,
        tmp_path,
        DATA / "vanishing",
        {"rule_to_invoke": "VanishingGradient"},
        options,
    )
    assert_same(container, plain)
    uid = docker(
        "run",
        "--rm",
        *options,
        "--entrypoint",
        "python",
        image.name,
        "-c",
        "import os; print(os.getuid())",
    ).stdout.strip()
    assert uid == (user.partition(":")[0] if user else "0")
    # The report is written with a read-only root file system too (it needs no settings
    # folder: its charts are drawn in the browser).
    assert "VanishingGradient" in (container.layout.output / "rule_report.html").read_text()


@pytest.mark.parametrize(
    ("how", "code", "signal_name"),
    [(["stop", "--time", "30"], 143, "SIGTERM"), (["kill", "--signal", "INT"], 130, "SIGINT")],
    ids=["docker-stop-SIGTERM", "SIGINT-as-StopProcessingJob"],
)
def test_stop_mid_run_ends_as_stopped_within_seconds(
    docker: Docker, image: Image, tmp_path: Path, how: list[str], code: int, signal_name: str
) -> None:
    """SIGTERM (docker stop) or SIGINT while the rule waits for more steps: Stopped, exit
    143 / 130, within 5 s of the evaluator taking the signal (its `stop_requested` line, to the
    container's end as Docker recorded it: the docker commands' own time on a loaded machine is
    not the evaluator's); the evaluator is PID 1, so the signal reaches it directly."""
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(live_trial(tmp_path / "live"))
    name = f"rule-evaluator-test-{uuid.uuid4().hex[:12]}"
    docker(
        "run",
        "--detach",
        "--name",
        name,
        *docker.run_options(
            layout, env={"rule_to_invoke": "VanishingGradient", "wait_for_training_end": "true"}
        ),
        image.name,
    )
    try:
        docker.wait_for_line(name, '"status": "InProgress"')
        pid1 = docker("exec", name, "cat", "/proc/1/cmdline").stdout.split("\0")
        assert "/opt/venv/bin/rule-evaluator" in pid1
        time.sleep(1.5)  # the rule evaluates steps 0-2, then waits for step 3
        docker(*how, name)
        exit_code = int(docker("wait", name, timeout=30).stdout.strip())
        ended = docker("inspect", "--format", "{{.State.FinishedAt}}", name).stdout.strip()
        logs = docker("logs", name).stdout
    finally:
        docker("rm", "--force", name, check=False)
    outcome = Outcome(exit_code, logs, "", layout)
    assert exit_code == code, outcome.describe()
    taken = [line for line in outcome.lines() if line.get("event") == "stop_requested"]
    assert [line["signal"] for line in taken] == [signal_name], outcome.describe()
    elapsed = (_instant(ended) - _instant(taken[0]["timestamp"])).total_seconds()
    assert 0 <= elapsed < 5, f"took {elapsed:.1f} s from stop_requested to the container's end"
    assert outcome.message == "Stopped"
    assert outcome.result is not None and outcome.result["status"] == "Stopped"
    assert outcome.statuses()[-1] == "Stopped"


def test_tensorboard_log_mounted(docker: Docker, image: Image, tmp_path: Path) -> None:
    """A tensorboardX log folder mounted as the trial: the image gives the plain command's
    verdict (LossNotDecreasing fires on a flat loss)."""
    pytest.importorskip("tensorboardX")
    from tests.support.tb_runs import write_run

    log = write_run("flat_loss", tmp_path / "log")
    container, plain = both(docker, image, tmp_path, log, {"rule_to_invoke": "LossNotDecreasing"})
    assert_same(container, plain)
    assert container.returncode == 1
    assert container.message == FIRED.format(rule="LossNotDecreasing", step=10)


def _instant(stamp: str) -> datetime:
    """An RFC 3339 time as Docker (nanoseconds) or our log lines (microseconds) write it."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction or '0')[:6]:0<6}+00:00")
