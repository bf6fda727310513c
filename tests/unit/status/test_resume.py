"""Reading an earlier attempt's result file to resume it (``evaluator.status.resume``)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from evaluator.config import RuleSpec
from evaluator.modes import ModeKeys, WriterStep
from evaluator.reporting import StatusReporter
from evaluator.status import RESULT_FILE_NAME, RuleStatus
from evaluator.status.resume import previous_run, run_key

TRIAL = "s3://b/job/debug-output"
SPECS = [
    RuleSpec(name="VanishingGradient", configuration_name="VanishingGradient"),
    RuleSpec(name="LossNotDecreasing", configuration_name="LossNotDecreasing"),
]
EVIDENCE = {"tensors_checked": 3, "comparisons": 12, "reasons": [], "closest": []}


def _earlier(output: Path, *, exit_code: int | None, status: str = "InProgress") -> None:
    rules: list[dict[str, Any]] = [
        {
            "rule": "VanishingGradient",
            "configuration_name": "VanishingGradient",
            "status": "IssuesFound",
            "exit_code": 1,
            "step": 8,
            "fired_steps": [8],
            "steps_evaluated": 9,
            "details": "RuleEvaluationConditionMet: ...\n",
            "evidence": EVIDENCE,
        },
        {
            "rule": "LossNotDecreasing",
            "configuration_name": "LossNotDecreasing",
            "status": status,
            "exit_code": None,
            "step": 40,
            "fired_steps": [],
            "steps_evaluated": 41,
            "evidence": {"comparisons": 5},
        },
    ]
    document = {
        "version": 1,
        "status": status,
        "exit_code": exit_code,
        "run_key": run_key(TRIAL, SPECS),
        "started_at": "2026-11-23T00:00:00.000Z",
        "rules": rules,
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / RESULT_FILE_NAME).write_text(json.dumps(document))


def test_a_killed_attempt_is_resumed_keeping_verdicts_and_their_evidence(tmp_path: Path) -> None:
    """An InProgress result file of the same run: the verdict that stands keeps its status,
    firing and evidence; the other rule goes on after its last evaluated step."""
    _earlier(tmp_path, exit_code=None)
    earlier, why_not = previous_run(tmp_path, run_key(TRIAL, SPECS))
    assert why_not is None and earlier is not None
    assert earlier.steps() == {"LossNotDecreasing": 40}
    reporter = StatusReporter(SPECS, output_dir=tmp_path, message_dir=None, trial=TRIAL)
    reporter.resume(earlier)
    assert reporter.finished("VanishingGradient") and not reporter.finished("LossNotDecreasing")
    assert reporter.resumed_step("LossNotDecreasing") == 40
    reporter.start("LossNotDecreasing")
    reporter.finish("LossNotDecreasing")
    assert reporter.close() == 1
    document = json.loads((tmp_path / RESULT_FILE_NAME).read_text())
    kept, resumed = document["rules"]
    assert kept["status"] == RuleStatus.ISSUES_FOUND.value and kept["fired_steps"] == [8]
    assert kept["evidence"] == EVIDENCE
    assert resumed["steps_evaluated"] == 41 and resumed["status"] == "NoIssuesFound"
    assert document["resumed"] == {"LossNotDecreasing": 40}


def test_a_finished_or_different_run_is_not_resumed(tmp_path: Path) -> None:
    """A result file with a verdict, or with another run_key, is replaced, with the reason."""
    _earlier(tmp_path, exit_code=1, status="IssuesFound")
    assert previous_run(tmp_path, run_key(TRIAL, SPECS))[1] == (
        "the earlier run finished (IssuesFound, exit 1)"
    )
    _earlier(tmp_path, exit_code=None)
    other = run_key(
        TRIAL,
        [
            RuleSpec(
                name="VanishingGradient",
                configuration_name="VanishingGradient",
                parameters={"threshold": "1"},
            )
        ],
    )
    assert "another trial, rules or parameters" in str(previous_run(tmp_path, other)[1])
    assert previous_run(tmp_path / "none", other) == (None, None)


def _phases(step: int) -> WriterStep:
    """A TensorBoard run with phases: global 2s is TRAIN s, 2s + 1 is EVAL s."""
    return WriterStep(step // 2, ModeKeys.EVAL if step % 2 else ModeKeys.TRAIN)


def test_writer_steps_are_shown_and_a_resume_goes_on_from_the_global_steps(
    tmp_path: Path,
) -> None:
    """With a trial whose global steps are not the writer's, the result file shows the
    writer's steps and modes, keeps the global ones under ``global_steps``, and an attempt
    resumed from it goes on from the global steps."""
    reporter = StatusReporter(
        SPECS, output_dir=tmp_path, message_dir=None, trial=TRIAL, run_key=run_key(TRIAL, SPECS)
    )
    reporter.show_steps(_phases)
    reporter.start("VanishingGradient")
    reporter.step_evaluated("VanishingGradient", 14)
    reporter.fired("VanishingGradient", 15)
    reporter.finish("VanishingGradient")
    reporter.start("LossNotDecreasing")
    reporter.step_evaluated("LossNotDecreasing", 40)
    reporter.stop(signal.SIGTERM)
    assert reporter.close() == 143
    document = json.loads((tmp_path / RESULT_FILE_NAME).read_text())
    fired, going = document["rules"]
    assert (fired["step"], fired["step_mode"]) == (7, "EVAL")
    assert (fired["fired_steps"], fired["fired_modes"]) == ([7], ["EVAL"])
    assert fired["global_steps"] == {"step": 15, "fired_steps": [15]}
    assert "at step 7 (EVAL) resulted" in fired["details"]
    assert (going["step"], going["step_mode"], going["global_steps"]["step"]) == (20, "TRAIN", 40)
    earlier, why_not = previous_run(tmp_path, run_key(TRIAL, SPECS))
    assert why_not is None and earlier is not None
    assert earlier.steps() == {"LossNotDecreasing": 40}
    assert earlier.rules["VanishingGradient"].fired_steps == (15,)
