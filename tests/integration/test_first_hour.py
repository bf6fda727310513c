"""The first hour of a new user (issue 26): each path a newcomer takes ends with the right answer
or a message that names the fix. One test (or a few) per friction of the issue, numbered as
there, running the real command in a subprocess."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.compat.golden import DATA
from tests.support.evaluator_cli import ROOT, EvaluatorCli, copy_trial
from tests.support.s3server import MotoS3

TRIAL = DATA / "vanishing"  # VanishingGradient fires at step 8


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    return EvaluatorCli(tmp_path)


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _without_end_marker(source: Path, destination: Path) -> Path:
    folder = copy_trial(source, destination)
    (folder / "training_job_end.ts").unlink(missing_ok=True)
    return folder


# ---- 1: an S3 trial without training_job_end.ts --------------------------------------------


def test_s3_copy_without_end_marker_completes_by_idle_scans_outside_sagemaker(
    cli: EvaluatorCli, tmp_path: Path, s3_server: MotoS3, s3_bucket: str
) -> None:
    """A finished trial uploaded to S3 without training_job_end.ts and read outside a SageMaker
    job ends by idle scans, as a local copy does, with the right verdict."""
    uri = s3_server.upload_folder(_without_end_marker(TRIAL, tmp_path / "t"), s3_bucket, "job")
    run = cli("--trial-dir", uri, "--rule", "VanishingGradient", aws=True)
    assert run.returncode == 1, run.describe()
    [start] = [e for e in _events(run.stdout) if e["event"] == "evaluation_started"]
    assert "idle scans" in start["waits_for"]
    assert "wait_for_training_end=true" in start["to_change"]
    assert run.result is not None and run.result["status"] == "IssuesFound"


def test_s3_trial_inside_a_sagemaker_job_waits_for_the_end_marker_and_says_how_to_change_it(
    cli: EvaluatorCli, tmp_path: Path, s3_server: MotoS3, s3_bucket: str
) -> None:
    """Inside a SageMaker job an S3 trial waits for training_job_end.ts, and the waiting line
    names that marker and the option that ends a finished copy by idle scans."""
    uri = s3_server.upload_folder(_without_end_marker(TRIAL, tmp_path / "t"), s3_bucket, "job")
    invocation = cli.command(
        "--trial-dir",
        uri,
        "--rule",
        "VanishingGradient",
        "--continue_after_fire",
        "true",
        aws=True,
        env={"TRAINING_JOB_NAME": "my-job", "EVALUATOR_WAIT_LOG_INTERVAL": "0.5"},
    )
    process = invocation.start()
    waiting: dict[str, Any] | None = None
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{") and json.loads(line).get("event") == "waiting":
                waiting = json.loads(line)
                break
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert waiting is not None, "no waiting line"
    assert "training_job_end.ts" in waiting["ends_when"]
    assert "wait_for_training_end=false" in waiting["to_change"]
    assert process.returncode == 143


# ---- 2: an unreachable S3 endpoint ----------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_endpoint_names_endpoint_reason_and_first_contact_budget(
    cli: EvaluatorCli, s3_server: MotoS3
) -> None:
    """An endpoint where nothing listens ends in exit 2 naming the endpoint, why it failed, the
    short budget an endpoint that never answered gets, and where the endpoint came from."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    run = cli(
        "--trial-dir",
        "s3://bucket/job/debug-output",
        "--rule",
        "VanishingGradient",
        aws=True,
        env={"AWS_ENDPOINT_URL": endpoint},
    )
    assert run.returncode == 2, run.describe()
    message = run.message or ""
    assert f"cannot reach S3 at {endpoint}" in message
    assert "connection refused" in message
    assert "3 s until the endpoint first answers" in message
    assert "AWS_ENDPOINT_URL" in message


def test_unreachable_endpoint_says_it_connects_first_and_is_read_once(
    cli: EvaluatorCli, s3_server: MotoS3
) -> None:
    """Issue 39: before any wait on an endpoint where nothing listens, the run says it is
    connecting; the location is read once (the trial is not opened to wait as long again), so
    the run ends with the error right after the start line (no rule waits for the trial),
    within a generous bound."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    run = cli(
        "--trial-dir",
        "s3://bucket/job",
        "--rule",
        "VanishingGradient",
        aws=True,
        env={"AWS_ENDPOINT_URL": endpoint},
    )
    seconds = time.monotonic() - started
    assert run.returncode == 2, run.describe()
    # the supervisor's run_confinement line, then the evaluation's first: connecting
    lines = [e for e in _events(run.stdout) if e["event"] != "run_confinement"]
    events = [e["event"] for e in lines]
    first = lines[0]
    assert first["event"] == "connecting", events
    assert first["trial"] == "s3://bucket/job" and "3 s" in first["gives_up_after"]
    assert events[1:] == [
        "evaluation_started",
        "rule_status",
        "rule_status",
        "evaluation_finished",
    ], events
    assert f"cannot reach S3 at {endpoint}" in (run.message or "")
    assert seconds < 30, seconds  # 3.4-5.4 s measured; twice the wait before (8.9 s)


# ---- 3: the CI recipe of docs/usage.md, run as written -----------------------------------


@pytest.mark.slow
def test_documented_ci_recipe_runs_verbatim(tmp_path: Path) -> None:
    """docs/usage.md's CI recipe (moto server, bucket, upload, run) works as written: the only
    change is a free port for the moto server."""
    from tests.support.docs import doc_block_after

    script = doc_block_after("docs/usage.md", "<!-- ci-recipe -->")
    lines = [line for line in script.splitlines() if not line.startswith("pip install")]
    port = str(_closed_port())
    body = "\n".join(lines).replace("5000", port)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and not k.startswith("EVALUATOR_")
    }
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    process = subprocess.Popen(
        ["bash", "-c", "set -e\n" + body],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        try:  # the recipe's moto server too, had the script stopped before its kill line
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert process.returncode == 0, f"{body}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    result = json.loads((tmp_path / "out" / "rule_evaluation_result.json").read_text())
    assert result["status"] == "IssuesFound"


# ---- 4: an output folder that cannot be written ---------------------------------------------


def test_unwritable_output_folder_is_a_client_error_before_any_evaluation(
    cli: EvaluatorCli, tmp_path: Path
) -> None:
    """An output folder that cannot be made or written ends at once in exit 2 with a
    ClientError naming it and the fix; no rule starts."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    output = blocker / "out"
    run = cli("--trial-dir", str(TRIAL), "--rule", "VanishingGradient", "--output-dir", str(output))
    assert run.returncode == 2, run.describe()
    assert f"output folder '{output}'" in run.stderr
    assert "--output-dir" in run.stderr
    assert run.message is not None and run.message.startswith("ClientError: cannot write")
    assert not [e for e in _events(run.stdout) if e["event"] == "evaluation_started"]
    assert blocker.read_text() == "not a folder\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_read_only_output_folder_is_a_client_error(cli: EvaluatorCli, tmp_path: Path) -> None:
    """A read-only output folder ends in exit 2, not in a success without a result file."""
    output = tmp_path / "read-only"
    output.mkdir(mode=0o555)
    run = cli("--trial-dir", str(TRIAL), "--rule", "VanishingGradient", "--output-dir", str(output))
    assert run.returncode == 2, run.describe()
    assert "cannot write the result file" in run.stderr


# ---- 5: misspelt flags and commands, no arguments ------------------------------------------


def test_misspelt_trial_flag_gets_did_you_mean(cli: EvaluatorCli) -> None:
    """--trail-dir ends in 'no trial to evaluate' that suggests --trial-dir."""
    run = cli("--trail-dir", str(TRIAL), "--rule", "VanishingGradient")
    assert run.returncode == 2, run.describe()
    assert "Did you mean --trial-dir (for --trail-dir)?" in run.stderr


def test_misspelt_command_gets_did_you_mean(cli: EvaluatorCli) -> None:
    """A misspelt subcommand is named with the command it most likely means."""
    run = cli("sumary", str(TRIAL))
    assert run.returncode == 2, run.describe()
    assert "'rule-evaluator summary'" in run.stderr


@pytest.mark.parametrize(
    ("args", "suggested"),
    [
        (["summary", str(TRIAL), "--jsn"], "--json"),
        (["report", "somewhere", "--bogus-flag"], None),
        (["upload", "a", "s3://b/p", "--create-buket"], "--create-bucket"),
    ],
)
def test_subcommand_flags_get_did_you_mean_and_exit_2(
    cli: EvaluatorCli, args: list[str], suggested: str | None
) -> None:
    """A subcommand's unknown option exits 2 with its usage and one error line (with the
    option it most likely means), never as an internal error."""
    run = cli(*args)
    assert run.returncode == 2, run.describe()
    assert "InternalServerError" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, run.stderr
    if suggested is not None:
        assert f"did you mean {suggested}" in errors[0]


def test_no_arguments_prints_usage_and_the_error_once(cli: EvaluatorCli) -> None:
    """Without arguments (and outside SageMaker) the usage comes with one ClientError line."""
    run = cli()
    assert run.returncode == 2, run.describe()
    assert run.stderr.startswith("usage: rule-evaluator")
    assert run.stderr.count("ClientError:") == 1


def test_on_a_terminal_the_error_is_said_once(cli: EvaluatorCli) -> None:
    """With stdout and stderr on one terminal, a configuration error appears exactly once."""
    primary, secondary = pty.openpty()
    env = cli.env()
    process = subprocess.Popen(
        [sys.executable, "-m", "container.cli", "--trail-dir", str(TRIAL), "--rule", "X"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert process.wait(timeout=60) == 2
    text = b"".join(chunks).decode("utf-8", "replace")
    assert text.count("no trial to evaluate") == 1, text


# ---- 6: the parent of trials ------------------------------------------------------------------


def test_parent_of_trials_is_named_at_once(cli: EvaluatorCli, tmp_path: Path) -> None:
    """A folder whose sub-folders are trials is refused at once, listing them and how to pass
    one, without waiting for collection files."""
    parent = tmp_path / "trials"
    copy_trial(TRIAL, parent / "run-a")
    copy_trial(TRIAL, parent / "run-b")
    run = cli("--trial-dir", str(parent), "--rule", "VanishingGradient")
    assert run.returncode == 2, run.describe()
    message = run.message or ""
    assert "holds trials" in message and "run-a, run-b" in message
    assert f"--trial-dir {parent / 'run-a'}" in message
    assert not [e for e in _events(run.stdout) if e["event"] in ("waiting", "trial_empty")]


def test_summary_of_a_parent_of_trials_names_them(cli: EvaluatorCli, tmp_path: Path) -> None:
    """summary on a job folder holding debug-output names the trial inside it."""
    job = tmp_path / "my-job"
    copy_trial(TRIAL, job / "debug-output")
    run = cli("summary", str(job))
    assert run.returncode == 2, run.describe()
    assert f"rule-evaluator summary {job / 'debug-output'}" in run.stderr


# ---- 9: quiet by default ----------------------------------------------------------------------


def test_nothing_but_results_lands_in_the_output_folder(cli: EvaluatorCli) -> None:
    """Only the run's results land in the output folder (no settings or font caches)."""
    run = cli("--trial-dir", str(TRIAL), "--rule", "VanishingGradient")
    assert run.returncode == 1, run.describe()
    found = [p.name for p in cli.output_dir.rglob("*")]
    assert not [n for n in found if "matplotlib" in n or n.startswith("fontlist")], found


def test_early_errors_use_the_chosen_log_format(cli: EvaluatorCli) -> None:
    """--log-format console applies to an error found while the configuration is read."""
    run = cli("--trail-dir", "x", "--rule", "X", "--log-format", "console")
    assert run.returncode == 2, run.describe()
    assert not _events(run.stdout), run.stdout
    assert "[error" in run.stdout and "no trial to evaluate" in run.stdout


def test_rule_description_has_no_doubled_backticks(cli: EvaluatorCli) -> None:
    """rules NAME prints plain text: no reST ``code`` marks."""
    run = cli("rules", "VanishingGradient")
    assert run.returncode == 0, run.describe()
    assert "gradients" in run.stdout and "``" not in run.stdout
