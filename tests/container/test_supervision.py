"""The image's command as a supervisor: `docker stop` at any moment of start-up reads as
Stopped, and a SageMaker-style run (started as root, root-owned 0755 folders under /opt/ml)
writes its files while the rule code runs as an unprivileged uid."""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.compat.golden import DATA
from tests.container.harness import Docker, Image, Layout, Outcome, live_trial
from tests.support.evaluator_cli import wait_until_sigterm_is_handled
from tests.support.rule_code import COUNTS_STEPS

pytestmark = pytest.mark.container

WHO_AM_I = textwrap.dedent("""
    import os
    from smdebug.rules import Rule

    class WhoAmI(Rule):
        def __init__(self, base_trial, output_dir):
            super().__init__(base_trial)
            with open(os.path.join(output_dir, "uid"), "w") as f:
                f.write(f"{os.getuid()}:{os.getgid()}")

        def invoke_at_step(self, step):
            name = self.base_trial.tensor_names()[0]
            self.base_trial.tensor(name).value(step)
            return step == 2  # fires: the message file must be written too
""")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trials" / "vanishing_gradients"


@pytest.mark.parametrize("delay", [0.1, 0.3, 1.0])
def test_docker_stop_soon_after_start_is_stopped(
    docker: Docker, image: Image, tmp_path: Path, delay: float
) -> None:
    """`docker stop` 0.1, 0.3 and 1 s after the command started (imports, the child's start,
    configuration, trial): exit 143 and Stopped in the message file, within seconds, never a
    verdict. "Started" is when PID 1 catches SIGTERM: before that the interpreter itself is
    starting, and the kernel drops signals PID 1 does not handle (docs/reliability.md)."""
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(live_trial(tmp_path / "live"))
    name = f"rule-evaluator-test-{uuid.uuid4().hex[:12]}"
    env = {"rule_to_invoke": "VanishingGradient", "wait_for_training_end": "true"}
    docker("run", "--detach", "--name", name, *docker.run_options(layout, env=env), image.name)
    try:
        pid = docker("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
        wait_until_sigterm_is_handled(int(pid))  # PID 1, seen from the host
        time.sleep(delay)
        sent = time.monotonic()
        docker("stop", "--time", "30", name)
        exit_code = int(docker("wait", name, timeout=60).stdout.strip())
        elapsed = time.monotonic() - sent
        logs = docker("logs", name).stdout
    finally:
        docker("rm", "--force", name, check=False)
    outcome = Outcome(exit_code, logs, "", layout)
    assert exit_code == 143, outcome.describe()
    assert elapsed < 15, f"took {elapsed:.1f} s"
    assert outcome.message == "Stopped"
    if outcome.result is not None:
        assert outcome.result["status"] == "Stopped", outcome.describe()


def test_sagemaker_style_root_owned_folders(docker: Docker, image: Image, tmp_path: Path) -> None:
    """No --user, root-owned 0755 folders at /opt/ml/processing/input/tensors,
    /opt/ml/processing/output/rule and /opt/ml/output, a processingjobconfig.json: the result
    and message files are written, and the rule code ran as a non-root uid."""
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(DATA / "vanishing")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "who.py").write_text(WHO_AM_I)
    layout.mounts[rules] = "/rules"
    config = layout.opt_ml / "config"
    config.mkdir()
    environment = {"rule_to_invoke": "WhoAmI", "source_s3_uri": "/rules/who.py"}
    (config / "processingjobconfig.json").write_text(
        json.dumps({"ProcessingJobName": "rule-job", "Environment": environment})
    )
    for folder in (layout.opt_ml / "output", layout.output, rules, config, tmp_path):
        folder.chmod(0o755)  # as SageMaker makes them: root's, not writable by others
    outcome = docker.run(image.name, layout)
    assert outcome.returncode == 1, outcome.describe()
    assert outcome.result is not None and outcome.result["status"] == "IssuesFound"
    assert outcome.message is not None and "rule WhoAmI at step 2" in outcome.message
    uid, _, gid = (layout.output / "uid").read_text().partition(":")
    assert int(uid) != 0 and int(gid) != 0, outcome.describe()
    assert (layout.output / "rule_evaluation_result.json").stat().st_uid == int(uid)
    assert '"event": "running_as"' in outcome.stdout
    report = layout.output / "rule_report.html"  # written by the unprivileged evaluation
    assert report.stat().st_uid == int(uid) and "WhoAmI" in report.read_text()


def test_docker_kill_then_rerun_resumes(docker: Docker, image: Image, tmp_path: Path) -> None:
    """`docker kill` (SIGKILL to the whole container) mid-run, then the same run again on the
    same output folder: it resumes and reaches the uninterrupted run's firings and step count.
    The rule is held before its 9th step until the kill, so the kill lands between its two
    firings however slow the machine is."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "counts.py").write_text(COUNTS_STEPS)
    hold = rules / "hold"
    hold.touch()
    env = {
        "rule_to_invoke": "CountsSteps",
        "source_s3_uri": "/rules/counts.py",
        "continue_after_fire": "true",
        "hold": "/rules/hold",
    }
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(EXAMPLE)
    layout.mounts[rules] = "/rules"
    name = f"rule-evaluator-test-{uuid.uuid4().hex[:12]}"
    docker("run", "--detach", "--name", name, *docker.run_options(layout, env=env), image.name)
    result = layout.output / "rule_evaluation_result.json"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (json.loads(result.read_text()).get("step") or 0) > 5:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        docker("kill", name)
        docker("wait", name, timeout=60)
    finally:
        docker("rm", "--force", name, check=False)
    killed = json.loads(result.read_text())
    assert killed["status"] == "InProgress" and killed["fired_steps"] == [3]
    hold.unlink()
    again = docker.run(image.name, layout, env=env)
    assert again.returncode == 1, again.describe()
    assert again.result is not None and again.result["fired_steps"] == [3, 11]
    assert again.result["rules"][0]["steps_evaluated"] == 16
    assert again.result["resumed"] == {"CountsSteps": killed["step"]}
    assert '"event": "evaluation_resumed"' in again.stdout


ORPHANS = textwrap.dedent("""
    import subprocess
    from smdebug.rules import Rule

    class LeavesOrphans(Rule):
        def invoke_at_step(self, step):
            # sh starts a short sleep in the background and exits: the sleep is an orphan,
            # reparented to PID 1, and a zombie when it ends unless PID 1 reaps it.
            subprocess.run(["sh", "-c", "sleep 0.2 & exit 0"], check=True)
            name = self.base_trial.tensor_names()[0]
            self.base_trial.tensor(name).value(step)
            return False
""")
COUNT_ZOMBIES = (
    "import os\n"
    "print(sum(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0] == 'Z'"
    " for p in os.listdir('/proc') if p.isdigit()))"
)


def test_pid_1_reaps_orphans(docker: Docker, image: Image, tmp_path: Path) -> None:
    """Rule code whose subprocesses leave orphans behind: PID 1 (the supervisor) reaps them,
    so no zombie piles up in a container started without --init."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "orphans.py").write_text(ORPHANS)
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(live_trial(tmp_path / "live"))
    layout.mounts[rules] = "/rules"
    env = {
        "rule_to_invoke": "LeavesOrphans",
        "source_s3_uri": "/rules/orphans.py",
        "wait_for_training_end": "true",
    }
    name = f"rule-evaluator-test-{uuid.uuid4().hex[:12]}"
    docker("run", "--detach", "--name", name, *docker.run_options(layout, env=env), image.name)
    try:
        docker.wait_for_line(name, '"status": "InProgress"')
        time.sleep(2)  # three steps evaluated, their orphans ended long ago
        zombies = docker("exec", name, "/opt/venv/bin/python", "-c", COUNT_ZOMBIES).stdout.strip()
        docker("stop", "--time", "30", name)
    finally:
        docker("rm", "--force", name, check=False)
    assert zombies == "0"


PLANTS_LINK = textwrap.dedent("""
    import json
    import os
    import time
    from smdebug.rules import Rule

    class PlantsLink(Rule):
        # Shipped setup (root, EVALUATOR_RUN_AS): forges a verdict on the supervisor's pipe and
        # leaves .sagemaker-ignore as a link to a root-only folder for the next run.
        def __init__(self, base_trial, output_dir):
            super().__init__(base_trial)
            self.output_dir = output_dir

        def invoke_at_step(self, step):
            ignored = os.path.join(self.output_dir, ".sagemaker-ignore")
            os.rename(ignored, f"{ignored}-moved-{time.time_ns()}")
            os.symlink("/victim", ignored)
            line = (json.dumps({"m": "verdict", "exit_code": 0}) + "\\n").encode()
            for name in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                        os.write(int(name), line)
                except OSError:
                    pass
            os._exit(0)
""")


def test_hostile_rule_in_the_shipped_setup(docker: Docker, image: Image, tmp_path: Path) -> None:
    """As SageMaker starts it (root, EVALUATOR_RUN_AS): a rule that forges verdict 0 and exits
    gets exit 3; on the rerun with the same output folder, the root-only folder its planted
    .sagemaker-ignore link points at is not given to the unprivileged user."""
    layout = Layout(tmp_path / "container")
    layout.mount_tensors(DATA / "vanishing")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "plant.py").write_text(PLANTS_LINK)
    layout.mounts[rules] = "/rules"
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    layout.mounts[victim] = "/victim"
    config = layout.opt_ml / "config"
    config.mkdir()
    environment = {"rule_to_invoke": "PlantsLink", "source_s3_uri": "/rules/plant.py"}
    (config / "processingjobconfig.json").write_text(
        json.dumps({"ProcessingJobName": "rule-job", "Environment": environment})
    )
    for folder in (layout.opt_ml / "output", layout.output, rules, config, tmp_path):
        folder.chmod(0o755)
    first = docker.run(image.name, layout)
    assert first.returncode == 3, first.describe()
    assert first.message is not None and first.message.startswith("InternalServerError: ")
    assert (layout.output / ".sagemaker-ignore").is_symlink()
    second = docker.run(image.name, layout)  # the resume path: same output folder, as root
    assert second.returncode == 3, second.describe()
    assert victim.stat().st_uid == 0 and victim.stat().st_mode & 0o777 == 0o700
