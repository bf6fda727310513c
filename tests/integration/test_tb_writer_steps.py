"""The steps a user sees on a TensorBoard run with phases are the steps the writer logged (issue
39): on logs written by tensorboardX, with phase folders (Keras' ``train/`` and
``validation/``) and with phase words in tags (Hugging Face's ``train/loss``, ``eval/loss``),
the step in the message, ``step`` and ``fired_steps`` in the result file, the evidence, the log
lines and the report's axis equal the step TensorBoard's own ``EventAccumulator`` shows for
the value that fired, with its mode; the trial's global steps stay internal."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import EvaluatorCli, EvaluatorRun
from tests.support.tb_logs import oracle_values

pytest.importorskip("tensorboardX")
pytest.importorskip("tensorboard")


def _phase_folders(root: Path, *, bad_at: int) -> Path:
    """Keras-style: ``train/`` and ``validation/`` each log ``loss`` every step; the
    validation loss is NaN from ``bad_at`` on."""
    from tensorboardX import SummaryWriter

    train, val = SummaryWriter(str(root / "train")), SummaryWriter(str(root / "validation"))
    for step in range(20):
        train.add_scalar("loss", 1.0 / (step + 1), step)
        val.add_scalar("loss", math.nan if step >= bad_at else 1.2 / (step + 1), step)
    train.close()
    val.close()
    return root


def _tag_phases(root: Path, *, bad_tag: str, bad_at: int) -> Path:
    """Hugging Face Trainer style, one folder: ``train/loss`` every 10 steps, ``eval/loss``
    every 50; ``bad_tag`` is NaN from step ``bad_at`` on."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(root))
    for step in range(10, 301, 10):
        tags = ["train/loss", *(["eval/loss"] if step % 50 == 0 else [])]
        for tag in tags:
            bad = tag == bad_tag and step >= bad_at
            writer.add_scalar(tag, math.nan if bad else 2.0 / step, step)
    writer.close()
    return root


def _first_nan(folder: Path, tag: str) -> int:
    """The step ``EventAccumulator`` shows for the first NaN of ``tag`` in ``folder``."""
    shown = oracle_values(folder)[tag]
    return min(s for s, v in shown.items() if math.isnan(v))


def _run(tmp_path: Path, log: Path) -> EvaluatorRun:
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli("--trial-dir", str(log), "--rule", "ExplodingTensor", "--poll_interval", "0.1")
    assert run.returncode == 1, run.describe()
    return run


def _assert_writer_step(run: EvaluatorRun, step: int, mode: str) -> None:
    """Every output names ``step`` in ``mode``, never the global step."""
    result: dict[str, Any] | None = run.result
    assert result is not None, run.describe()
    [rule] = result["rules"]
    internal = 2 * step + (1 if mode == "EVAL" else 0)
    assert (rule["step"], rule["step_mode"]) == (step, mode)
    assert (rule["fired_steps"], rule["fired_modes"]) == ([step], [mode])
    assert rule["global_steps"] == {"step": internal, "fired_steps": [internal]}
    assert (result["step"], result["fired_steps"]) == (step, [step])
    said = f"Evaluation of the rule ExplodingTensor at step {step} ({mode}) resulted"
    assert said in (run.message or ""), run.describe()
    assert said in rule["details"]
    reason = rule["evidence"]["reasons"][0]
    assert (reason["step"], reason["mode"], reason["global_step"]) == (step, mode, internal)
    assert f"{mode} step {step}" in reason["sentence"]
    assert "global step" not in reason["sentence"]
    assert reason["diagnosis_figures"]["first_non_finite_step"] == step
    fired = [e for e in run.log_lines if e.get("event") == "rule_fired"]
    assert [(e["step"], e["mode"]) for e in fired] == [(step, mode)]
    ended = [e for e in run.log_lines if e.get("event") == "rule_status" and e.get("exit_code")]
    assert (ended[-1]["step"], ended[-1]["fired_steps"]) == (step, [step])
    assert not any(f"at step {internal} " in json.dumps(e) for e in run.log_lines)
    _assert_report_axis(run.output_dir, step, mode)


def _assert_report_axis(output: Path, step: int, mode: str) -> None:
    """The report's series are drawn per mode at the writer's steps, the firing at ``step``;
    its page names ``<mode> step <step>``."""
    data = json.loads((output / "rule_report_data.json").read_text())
    [entry] = data["rules"].values()
    series = entry["series"]
    firings = [(s["mode"], f[0]) for s in series for f in s["firings"]]
    assert firings == [(mode, step)]
    for s in series:
        steps = [p[0] for p in s["points"]]
        assert s["mode"] in ("TRAIN", "EVAL") and steps == sorted(set(steps))
    page = (output / "rule_report.html").read_text()
    assert f"fired at {mode} step {step}." in page


def test_phase_folders_show_the_validation_step(tmp_path: Path) -> None:
    """A NaN in ``validation/`` at event step 7 is reported at EVAL step 7, the step
    EventAccumulator shows for it, not at the internal global step 15."""
    log = _phase_folders(tmp_path / "run", bad_at=7)
    step = _first_nan(log / "validation", "loss")
    assert step == 7
    _assert_writer_step(_run(tmp_path, log), step, "EVAL")


def test_tag_phases_show_the_training_step(tmp_path: Path) -> None:
    """Hugging Face's ``train/loss`` NaN from step 120 on: fired at TRAIN step 120."""
    log = _tag_phases(tmp_path / "run", bad_tag="train/loss", bad_at=120)
    step = _first_nan(log, "train/loss")
    _assert_writer_step(_run(tmp_path, log), step, "TRAIN")


def test_tag_phases_show_the_evaluation_step(tmp_path: Path) -> None:
    """Hugging Face's ``eval/loss`` NaN from step 150 on: fired at EVAL step 150."""
    log = _tag_phases(tmp_path / "run", bad_tag="eval/loss", bad_at=150)
    step = _first_nan(log, "eval/loss")
    assert step == 150
    _assert_writer_step(_run(tmp_path, log), step, "EVAL")


def test_a_run_without_phases_shows_its_steps_as_before(tmp_path: Path) -> None:
    """A run of one folder without phase words: global steps are the logged steps, so the
    result file says nothing more (no modes, no global_steps)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(12):
        writer.add_scalar("loss", math.nan if step >= 9 else 1.0 / (step + 1), step)
    writer.close()
    run = _run(tmp_path, tmp_path / "run")
    assert run.result is not None
    [rule] = run.result["rules"]
    assert (
        (rule["step"], rule["fired_steps"])
        == (9, [9])
        == (_first_nan(tmp_path / "run", "loss"), [9])
    )
    assert "step_mode" not in rule and "global_steps" not in rule
    assert "at step 9 resulted" in (run.message or "")
