"""What the command says: missing trials fail at once, waits are visible, the verdict is always
printed, and the AWS/HTTP libraries add nothing to stderr."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.compat.golden import DATA
from tests.support.evaluator_cli import EvaluatorCli, Invocation
from tests.support.s3server import MotoS3

# The lines libraries print unasked: none may reach a user.
_NOISE = ("Unclosed", "Found credentials", "botocore", "aiohttp", "Traceback", "Task was destroyed")


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    return EvaluatorCli(tmp_path)


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _assert_quiet(*outputs: str) -> None:
    """No library line on stderr, nor routed through our log handler onto stdout."""
    lines = [line for text in outputs for line in text.splitlines()]
    noisy = [line for line in lines if any(n in line for n in _NOISE)]
    assert not noisy, "\n".join(noisy)


def test_summary_of_a_missing_folder_exits_2_at_once(cli: EvaluatorCli) -> None:
    """summary on a folder that does not exist exits 2 with a ClientError line, without waiting."""
    run = cli("summary", "/no/such/folder", timeout=20)
    assert run.returncode == 2, run.describe()
    assert run.stderr.startswith("ClientError: ") and "/no/such/folder" in run.stderr


def test_empty_s3_prefix_says_it_waits(cli: EvaluatorCli, s3_bucket: str) -> None:
    """An S3 prefix with no objects logs that it is empty and what it waits for, then waits."""
    run = cli(
        "--rule",
        "VanishingGradient",
        "--trial-dir",
        f"s3://{s3_bucket}/nothing/here",
        aws=True,
        env={"EVALUATOR_COLLECTION_WAIT_TIMEOUT": "2", "EVALUATOR_WAIT_LOG_INTERVAL": "0.5"},
    )
    events = _events(run.stdout)
    empty = [e for e in events if e.get("event") == "trial_empty"]
    assert empty and empty[0]["awaited"] == "collection files", run.describe()
    waiting = [e for e in events if e.get("event") == "waiting"]
    assert waiting and waiting[0]["trial"] == f"s3://{s3_bucket}/nothing/here", run.describe()
    assert run.returncode == 2, run.describe()
    _assert_quiet(run.stdout, run.stderr)


def test_start_line_names_trial_and_what_ends_the_run(cli: EvaluatorCli) -> None:
    """The first line names the trial, where it came from, what ends the run and the output."""
    trial = str(DATA / "vanishing")
    run = cli("--rule", "VanishingGradient", "--trial-dir", trial)
    [start] = [e for e in _events(run.stdout) if e.get("event") == "evaluation_started"]
    assert (start["trial"], start["trial_source"]) == (trial, "base_trial")
    assert "idle scans" in str(start["waits_for"])
    assert start["output_dir"] == str(cli.output_dir)


def test_warning_level_still_prints_the_verdict(cli: EvaluatorCli) -> None:
    """At --log-level WARNING the evaluation_finished line is printed and names the result file."""
    run = cli(
        "--rule",
        "VanishingGradient",
        "--trial-dir",
        str(DATA / "vanishing"),
        "--log-level",
        "WARNING",
    )
    events = _events(run.stdout)
    assert [e["event"] for e in events] == ["evaluation_finished"], run.describe()
    assert events[0]["result_file"] == str(run.result_path)
    assert events[0]["status"] == "IssuesFound" and run.returncode == 1
    assert run.result is not None


def test_s3_runs_print_only_our_lines_on_stderr(
    cli: EvaluatorCli, s3_server: MotoS3, s3_bucket: str
) -> None:
    """An S3 run that fires, one that fails (no such bucket) and one stopped by SIGTERM leave
    no library line (unclosed sessions, found credentials) on stderr."""
    fired_uri = s3_server.upload_folder(DATA / "vanishing", s3_bucket, "fired")
    fired = cli("--rule", "VanishingGradient", "--trial-dir", fired_uri, aws=True)
    assert fired.returncode == 1, fired.describe()
    _assert_quiet(fired.stdout, fired.stderr)

    error = cli(
        "--rule", "VanishingGradient", "--trial-dir", "s3://no-such-bucket-here/x", aws=True
    )
    assert error.returncode == 2, error.describe()
    _assert_quiet(error.stdout, error.stderr)

    # A live job: collections and steps, no end marker, so the run waits for more steps.
    s3_server.upload_folder(DATA / "vanishing", s3_bucket, "live")
    s3_server.client().delete_object(Bucket=s3_bucket, Key="live/training_job_end.ts")
    invocation = cli.command(
        "--rule",
        "VanishingGradient",
        "--trial-dir",
        f"s3://{s3_bucket}/live",
        "--threshold",
        "1e-30",
        aws=True,
    )
    _assert_quiet(*_stopped(invocation, when='"InProgress"'))
    # Stopped while still waiting for the collection files of an empty prefix.
    waiting = cli.command(
        "--rule",
        "VanishingGradient",
        "--trial-dir",
        f"s3://{s3_bucket}/empty",
        aws=True,
        env={"EVALUATOR_WAIT_LOG_INTERVAL": "0.5"},
    )
    _assert_quiet(*_stopped(waiting, when='"waiting"'))


def _stopped(invocation: Invocation, *, when: str) -> tuple[str, str]:
    """Run ``invocation``, send SIGTERM a second after a stdout line holding ``when``; its
    stdout and stderr (exit code 143 asserted)."""
    process = invocation.start()
    seen: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if when in line:
                break
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    return "".join(seen) + stdout, stderr
