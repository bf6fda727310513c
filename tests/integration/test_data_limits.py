"""Hostile or damaged data, end to end through the real command: over-limit index files are a
ClientError naming the file and the limit, catastrophic regexes answer, and event files that
cannot give their records are logged, not silently skipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.formats.keys import event_key
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.support.evaluator_cli import EvaluatorCli, EvaluatorRun

EVIL = "^(a+)+$"
LONG_NAME = "a" * 5000 + "!"

READS_EVERY_STEP = f"""\
from smdebug.rules import Rule


class ReadsEveryStep(Rule):
    def __init__(self, base_trial, action_str=None):
        super().__init__(base_trial, action_str)

    def invoke_at_step(self, step):
        assert self.base_trial.tensor_names(regex={EVIL!r}) == ["aaa"]
        assert self.base_trial.tensor_names(collection="evil") == ["aaa"]
        return self.base_trial.tensor("aaa").value(step).item() < 0
"""


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    """The command, with its /opt/ml under the test's folder."""
    return EvaluatorCli(tmp_path)


def write_trial(root: Path, steps: range) -> None:
    """An ended trial whose collection ``evil`` has a catastrophic include_regex and whose
    tensors include a long name that almost matches it."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("evil", include_regex=[EVIL])])
    for step in steps:
        writer.write_step(
            step, {"aaa": np.float32(step), LONG_NAME: np.float32(0)}, mode=ModeKeys.TRAIN
        )
    writer.end_training()


def run_rule(
    cli: EvaluatorCli, tmp_path: Path, trial: Path, env: dict[str, str] | None = None
) -> EvaluatorRun:
    """Run ``ReadsEveryStep`` (a user's rule file) on ``trial``."""
    rule = tmp_path / "reads_every_step.py"
    rule.write_text(READS_EVERY_STEP, encoding="utf-8")
    return cli(
        "--trial-dir",
        str(trial),
        "--rule",
        "ReadsEveryStep",
        "--source_s3_uri",
        str(rule),
        env=env,
    )


def test_catastrophic_regexes_over_long_names_answer(cli: EvaluatorCli, tmp_path: Path) -> None:
    """``^(a+)+$`` as a regex argument and as an include_regex, against a 5000-character name
    that almost matches, ends the run with a verdict."""
    trial = tmp_path / "trial"
    write_trial(trial, range(3))
    run = run_rule(cli, tmp_path, trial)
    assert run.returncode == 0, run.describe()


def test_an_index_file_over_the_entry_limit_is_a_client_error(
    cli: EvaluatorCli, tmp_path: Path
) -> None:
    """With EVALUATOR_MAX_INDEX_ENTRIES below a step's entries, the run ends in ClientError
    naming the index file and the limit."""
    trial = tmp_path / "trial"
    write_trial(trial, range(2))
    run = run_rule(cli, tmp_path, trial, env={"EVALUATOR_MAX_INDEX_ENTRIES": "1"})
    assert run.returncode == 2, run.describe()
    assert run.message is not None and run.message.startswith("ClientError:"), run.describe()
    assert "000000000000_worker_0.json lists 2 entries" in run.message
    assert "max_index_entries" in run.message


def test_a_missing_event_file_is_logged_as_a_data_problem(
    cli: EvaluatorCli, tmp_path: Path
) -> None:
    """On an ended trial, a step whose event file is gone is skipped with a WARNING line that
    names the file and the problem."""
    trial = tmp_path / "trial"
    write_trial(trial, range(4))
    (trial / event_key(2, "worker_0")).unlink()
    run = run_rule(cli, tmp_path, trial)
    assert run.returncode == 0, run.describe()
    (line,) = [e for e in run.log_lines if e.get("event") == "data_problem"]
    assert line["level"] == "warning"
    assert line["problem"] == "missing"
    assert line["file"].endswith(event_key(2, "worker_0"))


def test_missing_empty_and_torn_event_files_are_counted_in_the_result(
    cli: EvaluatorCli, tmp_path: Path
) -> None:
    """A missing, an empty and a truncated event file on an ended trial: the run goes on, the
    result file counts and names all three under data_problems, and the end says so."""
    trial = tmp_path / "trial"
    write_trial(trial, range(6))
    (trial / event_key(1, "worker_0")).unlink()
    (trial / event_key(2, "worker_0")).write_bytes(b"")
    torn = trial / event_key(3, "worker_0")
    torn.write_bytes(torn.read_bytes()[:20])  # every record cut short
    run = run_rule(cli, tmp_path, trial)
    assert run.returncode == 0, run.describe()
    assert run.result is not None
    problems = run.result["data_problems"]
    assert problems["count"] == 3
    found = {(p["step"], p["problem"]) for p in problems["files"]}
    assert found == {(1, "missing"), (2, "empty"), (3, "truncated")}
    assert all(p["file"].endswith(event_key(p["step"], "worker_0")) for p in problems["files"])
    (summary,) = [e for e in run.log_lines if e.get("event") == "data_problems"]
    assert summary["count"] == 3 and summary["level"] == "warning"
