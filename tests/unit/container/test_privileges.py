"""The switch to EVALUATOR_RUN_AS never follows a symbolic link an earlier run's rule code
planted in the output folder, and changes no owner outside it (issue #25). Run as root, in a
subprocess: the switch cannot be undone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SWITCH = """
import sys, types
from container.privileges import drop_privileges
config = types.SimpleNamespace(output_dir=sys.argv[1], message_dir=sys.argv[2])
print(drop_privileges(config, {"EVALUATOR_RUN_AS": "65534:65534"}))
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the switch to a user")


def _switch(output: Path, messages: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SWITCH, str(output), str(messages)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_planted_links_are_not_followed(tmp_path: Path) -> None:
    """.sagemaker-ignore and the result file replaced by links to a root-only folder and
    file: the folder and file stay root's, .sagemaker-ignore becomes a folder of the user."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    secret = victim / "secret"
    secret.write_text("root only")
    output = tmp_path / "output"
    output.mkdir()
    (output / ".sagemaker-ignore").symlink_to(victim)
    (output / "rule_evaluation_result.json").symlink_to(secret)
    messages = tmp_path / "messages"
    messages.mkdir()
    assert _switch(output, messages) == "65534:65534"
    assert victim.stat().st_uid == 0 and secret.stat().st_uid == 0
    ignored = output / ".sagemaker-ignore"
    assert ignored.is_dir() and not ignored.is_symlink()
    assert ignored.stat().st_uid == 65534 and output.stat().st_uid == 65534
    assert (output / "rule_evaluation_result.json").is_symlink()  # left alone, not chowned
    assert messages.stat().st_uid == 0  # outside the output folder: never changes owner


def test_an_earlier_result_file_is_given_to_the_user(tmp_path: Path) -> None:
    """A real result file from an earlier run (root's) becomes the user's; a FIFO in its
    place does not block the switch."""
    output = tmp_path / "output"
    output.mkdir()
    (output / "rule_evaluation_result.json").write_text("{}")
    os.mkfifo(output / "rule_report_data.json")
    _switch(output, tmp_path)
    assert (output / "rule_evaluation_result.json").stat().st_uid == 65534
