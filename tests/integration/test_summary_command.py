"""The ``rule-evaluator summary`` command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


def _tensorboard_runs(root: Path) -> Path:
    """Two tensorboardX runs, ``a`` (with phase folders) and ``group/c`` (one folder)."""
    from tests.support.tb_logs import torch_style

    loss = {"loss": [(s, 1.0 / (s + 1)) for s in range(6)]}
    torch_style(root / "a" / "train", scalars=loss)
    torch_style(root / "a" / "validation", scalars=loss)
    torch_style(root / "group" / "c", scalars=loss)
    return root


def test_summary_of_a_folder_of_tensorboard_runs_summarises_each(tmp_path: Path) -> None:
    """A folder of TensorBoard runs (which a run refuses without --tensorboard-run) is
    summarised run by run, each named by its path there; --json keys them by it."""
    pytest.importorskip("tensorboardX")
    runs = _tensorboard_runs(tmp_path / "runs")
    text = run("summary", str(runs))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"2 trials in {runs}\n")
    assert "\n== a\n" in text.stdout and "\n== group/c\n" in text.stdout
    assert "steps per mode  TRAIN 6 (logged steps 0..5), EVAL 6 (logged steps 0..5)" in text.stdout
    document = json.loads(run("summary", str(runs), "--json").stdout)
    assert sorted(document["runs"]) == ["a", "group/c"]
    assert document["runs"]["group/c"]["steps_per_mode"] == {"GLOBAL": 6}
    assert "logged_steps" not in document["runs"]["group/c"]  # its global steps are logged
    assert document["runs"]["a"]["logged_steps"] == {"TRAIN": [0, 5], "EVAL": [0, 5]}


def test_summary_takes_tensorboard_run_as_the_run_does(tmp_path: Path) -> None:
    """--tensorboard-run NAME summarises that run of the folder, as a run reads it; a name
    that is not a run is a ClientError naming the flag and the runs."""
    pytest.importorskip("tensorboardX")
    runs = _tensorboard_runs(tmp_path / "runs")
    found = run("summary", str(runs), "--tensorboard-run", "group/c", "--json")
    assert found.returncode == 0, found.stderr
    assert "run group/c;" in json.loads(found.stdout)["mapping"]
    wrong = run("summary", str(runs), "--tensorboard-run", "b")
    assert wrong.returncode == 2
    assert "--tensorboard-run 'b' is not a run" in wrong.stderr and "a, group/c" in wrong.stderr
