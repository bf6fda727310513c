"""The ``rule-evaluator summary`` command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trials" / "vanishing_gradients"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "container.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_summary_of_the_bundled_example() -> None:
    """docs/usage.md's summary example prints steps per mode, workers, collections and tensors."""
    result = run("summary", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "training ended  yes" in out
    assert "workers         1: worker_0" in out
    assert "steps per mode  TRAIN 16" in out
    assert "gradients (3)" in out
    assert "gradients/layer0_weight" in out and "16 steps" in out


def test_summary_json_counts_steps_per_tensor() -> None:
    """--json gives machine-readable counts that agree with the trial."""
    result = run("summary", str(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["steps"] == 16 and data["first_step"] == 0 and data["last_step"] == 15
    assert data["tensors"]["loss"] == 16
    assert data["steps_per_mode"] == {"TRAIN": 16}


def test_summary_of_a_folder_without_trial_is_a_client_error(tmp_path: Path) -> None:
    """A folder with no smdebug output ends with exit 2 and says where it looked."""
    (tmp_path / "training_job_end.ts").touch()
    result = run("summary", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("ClientError: ")
    assert "collection files" in result.stderr
