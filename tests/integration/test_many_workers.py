"""Trials of many workers (data-parallel training): every worker's values are read as written,
a step counts as complete once every worker saved it, and a rule that compares the workers
fires at the right step, locally and on S3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 8
STEPS = 30
DIVERGES_AT = 20  # worker_5's gradient grows a thousandfold from this step

RULE = """
import numpy as np
from smdebug.rules import Rule


class WorkersDisagree(Rule):
    \"\"\"Fires when one worker's mean |gradient| is over `ratio` times another's.\"\"\"

    def __init__(self, base_trial, ratio="100", action_str=None):
        super().__init__(base_trial, action_str)
        self.ratio = float(ratio)

    def invoke_at_step(self, step):
        tensor = self.base_trial.tensor("gradients/dense/kernel")
        means = [np.mean(np.abs(tensor.value(step, worker=w))) for w in tensor.workers(step)]
        if len(means) != len(self.base_trial.workers()):
            raise RuntimeError(f"step {step}: {len(means)} workers")
        return max(means) > self.ratio * min(means)
"""


def gradient(step: int, worker: int) -> np.ndarray:
    value = np.linspace(0.1, 1.0, 12, dtype=np.float32).reshape(3, 4) * (worker + 1) + step
    if worker == 5 and step >= DIVERGES_AT:
        value *= np.float32(1000)
    return value


def write_workers(root: Path, *, last_step_workers: int = WORKERS, end: bool = True) -> None:
    """WORKERS workers x STEPS steps; the last step saved by ``last_step_workers`` of them."""
    collections = [Collection("gradients", include_regex=["^gradients/"])]
    for w in range(WORKERS):
        writer = TrialWriter(root, worker=f"worker_{w}")
        writer.write_collections(collections, num_workers=WORKERS)
        for step in range(STEPS):
            if step == STEPS - 1 and w >= last_step_workers:
                continue
            writer.write_step(
                step, {"gradients/dense/kernel": gradient(step, w)}, mode=ModeKeys.TRAIN
            )
    if end:
        TrialWriter(root).end_training()


def test_every_workers_values_are_read_as_written(tmp_path: Path) -> None:
    """workers() lists every worker, each step is saved by all of them, and value(step,
    worker=w) is worker w's array at every step."""
    write_workers(tmp_path / "trial")
    with create_trial(str(tmp_path / "trial")) as trial:
        names = [f"worker_{w}" for w in range(WORKERS)]
        assert sorted(trial.workers()) == names
        assert trial.steps() == list(range(STEPS))
        tensor = trial.tensor("gradients/dense/kernel")
        for step in range(STEPS):
            assert sorted(tensor.workers(step)) == names
            for w in range(WORKERS):
                np.testing.assert_array_equal(
                    tensor.value(step, worker=f"worker_{w}"), gradient(step, w)
                )


def test_a_step_some_workers_have_not_saved_is_incomplete(tmp_path: Path) -> None:
    """While training runs, a step saved by 7 of 8 workers is not among steps(), only among
    steps(show_incomplete_steps=True)."""
    write_workers(tmp_path / "trial", last_step_workers=WORKERS - 1, end=False)
    with create_trial(str(tmp_path / "trial")) as trial:
        assert trial.steps() == list(range(STEPS - 1))
        assert trial.steps(show_incomplete_steps=True) == list(range(STEPS))


@pytest.mark.parametrize("storage", ["local", "s3"])
def test_a_rule_comparing_workers_fires_where_they_diverge(
    storage: str, tmp_path: Path, request: Any
) -> None:
    """A user rule comparing every worker's gradient at each step fires at the step where one
    worker diverges (IssuesFound, exit 1), on a local folder and on S3."""
    write_workers(tmp_path / "trial")
    trial = str(tmp_path / "trial")
    if storage == "s3":
        server = request.getfixturevalue("s3_server")
        trial = server.upload_folder(tmp_path / "trial", server.new_bucket(), "job/debug-output")
    rule = tmp_path / "workers_rule.py"
    rule.write_text(RULE)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "container.cli", "--trial-dir", trial, "--rule", "WorkersDisagree"]
        + ["--source_s3_uri", str(rule), "--output-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((out / "rule_evaluation_result.json").read_text())
    assert result["fired_steps"] == [DIVERGES_AT]
    assert result["rules"][0]["steps_evaluated"] == DIVERGES_AT + 1
