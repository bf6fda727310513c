"""Hugging Face trainer states as trials (evaluator.sources.tensorboard.trainer_state): a
checkpoint folder, an output folder of checkpoint-* folders (the newest state followed, a live
run's next checkpoint picked up, a resumed run's history applied again from where it departs),
the end of training, a malformed file; and on the real runs of wild-hf-dev, the same verdict
as on the TensorBoard log the Trainer's own callback wrote."""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ClientError
from evaluator.rules import invoke_rule
from evaluator.rules.loader import build_rule
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.support.real_runs import WILD

RAW = sorted((WILD / "raw").glob("*.json")) if (WILD / "raw").is_dir() else []


def _state(path: Path, history: list[dict[str, Any]], *, global_step: int | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    step = global_step if global_step is not None else max(e["step"] for e in history)
    document = {"global_step": step, "max_steps": 100, "log_history": history}
    (path / "trainer_state.json").write_text(json.dumps(document))


def _history(steps: range, *, loss: Any = lambda s: 2.0 / (1 + s), eval_every: int = 0) -> list:
    out: list[dict[str, Any]] = []
    for s in steps:
        out.append({"loss": loss(s), "learning_rate": 1e-4, "epoch": s / 10, "step": s})
        if eval_every and s % eval_every == 0:
            out.append({"eval_loss": loss(s) * 1.1, "eval_runtime": 1.0, "step": s})
    return out


def _open(path: Path) -> Any:
    return create_trial(str(path), idle_scans_to_complete=1, poll_interval=0.05)


def test_a_checkpoint_folder_reads_as_the_callbacks_log(tmp_path: Path) -> None:
    """Tags lose their phase word and say the mode (train/loss -> loss at TRAIN steps,
    eval/loss -> loss at EVAL steps), values are float32 as a TensorBoard file holds them."""
    _state(tmp_path / "checkpoint-40", _history(range(10, 41, 10), eval_every=20))
    trial = _open(tmp_path / "checkpoint-40")
    try:
        assert trial.kind == "trainer_state"
        loss = trial.tensor("loss")
        assert [trial.mode_modestep(g)[1] for g in loss.steps()] == [10, 20, 20, 30, 40, 40]
        first = loss.steps()[0]
        assert loss.value(first) == np.float32(2.0 / 11)
        assert "learning_rate" in trial.tensor_names()
    finally:
        trial.close()


def test_a_trainer_states_steps_are_shown_as_the_trainer_logged_them(tmp_path: Path) -> None:
    """Every global step of the loss is shown as the ``step`` of its ``log_history`` entry,
    in its mode (``Trial.writer_step``), as the callback's TensorBoard log shows it."""
    _state(tmp_path / "checkpoint-40", _history(range(10, 41, 10), eval_every=20))
    trial = _open(tmp_path / "checkpoint-40")
    try:
        shown = [trial.writer_step(g) for g in trial.tensor("loss").steps()]
        assert [(s.mode.name if s.mode else None, s.step) for s in shown] == [
            ("TRAIN", 10), ("TRAIN", 20), ("EVAL", 20), ("TRAIN", 30), ("TRAIN", 40), ("EVAL", 40)
        ]  # fmt: skip
    finally:
        trial.close()


def test_the_newest_state_is_followed_and_a_new_checkpoint_is_picked_up(tmp_path: Path) -> None:
    _state(tmp_path / "checkpoint-20", _history(range(10, 21, 10)))
    _state(tmp_path / "checkpoint-40", _history(range(10, 41, 10)))
    trial = create_trial(str(tmp_path), poll_interval=0.05)  # live: until training ends
    try:
        trial.wait_for_steps([80])  # TRAIN step 40: global step 2 x 40
        steps = [trial.mode_modestep(g)[1] for g in trial.tensor("loss").steps()]
        assert steps == [10, 20, 30, 40]
        end = {"train_runtime": 3.0, "train_loss": 1.0, "step": 60}
        _state(tmp_path / "checkpoint-60", [*_history(range(10, 61, 10)), end])
        trial.wait_for_steps([120])
        steps = [trial.mode_modestep(g)[1] for g in trial.tensor("loss").steps()]
        assert steps == [10, 20, 30, 40, 50, 60]
        assert trial.training_ended()
    finally:
        trial.close()


def test_a_resumed_run_is_read_again_from_where_its_history_departs(tmp_path: Path) -> None:
    """A run resumed from checkpoint-20 logs steps 30 and 40 again, with other values: the
    newest state (checkpoint-50) replaces what the abandoned history said."""
    _state(tmp_path / "checkpoint-40", _history(range(10, 41, 10), loss=lambda s: 9.0))
    resumed = _history(range(10, 21, 10), loss=lambda s: 9.0) + _history(range(30, 51, 10))
    _state(tmp_path / "checkpoint-50", resumed)
    trial = _open(tmp_path)
    try:
        loss = trial.tensor("loss")
        by_step = {trial.mode_modestep(g)[1]: float(loss.value(g)) for g in loss.steps()}
        assert by_step[20] == 9.0 and math.isclose(by_step[30], 2.0 / 31, rel_tol=1e-6)
        assert sorted(by_step) == [10, 20, 30, 40, 50]
    finally:
        trial.close()


def test_the_end_of_training_ends_the_trial(tmp_path: Path) -> None:
    history = _history(range(10, 31, 10))
    _state(tmp_path, history)
    trial = create_trial(str(tmp_path), poll_interval=0.05)  # waits for the end: none yet
    try:
        assert not trial.training_ended()
    finally:
        trial.close()
    _state(tmp_path, [*history, {"train_runtime": 3.0, "train_loss": 1.0, "step": 30}])
    trial = create_trial(str(tmp_path), poll_interval=0.05)
    try:
        assert trial.training_ended()
    finally:
        trial.close()


def test_a_malformed_state_is_a_client_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text('{"log_history": 3}')
    with pytest.raises(ClientError) as caught:
        _open(tmp_path)
    assert "checkpoint-10/trainer_state.json" in str(caught.value)
    assert "no log_history list" in str(caught.value)


def _fired(path: Path, rule: str) -> tuple[int, ...]:
    trial = _open(path)
    try:
        result = invoke_rule(build_rule(registry.lookup(rule), trial, {}), raise_eval_cond=False)
        return tuple(result.fired_steps)
    finally:
        trial.close()


@pytest.mark.skipif(not RAW, reason=f"no wild-hf-dev runs at {WILD}")
@pytest.mark.parametrize("raw", RAW, ids=[p.stem for p in RAW])
def test_a_real_state_gets_its_tensorboard_logs_verdict(raw: Path, tmp_path: Path) -> None:
    """LossNotDecreasing and Overfit fire at the same steps on the run's trainer_state.json as
    on the TensorBoard log Hugging Face's callback wrote from it."""
    quiet = logging.getLogger("evaluator")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # restored: other tests read the evaluator's info lines
    try:
        shutil.copy(raw, tmp_path / "trainer_state.json")
        for rule in ("LossNotDecreasing", "Overfit"):
            assert _fired(tmp_path, rule) == _fired(WILD / "tb" / raw.stem, rule), rule
    finally:
        quiet.setLevel(level)


def test_the_command_takes_a_trainer_state_file(tmp_path: Path) -> None:
    """--trial-dir naming a trainer_state.json reads the checkpoint folder holding it: a loss
    that stops falling fires LossNotDecreasing (exit 1), and the result file says so."""
    import os

    from container.cli import evaluate

    flat = _history(range(10, 401, 10), loss=lambda s: 1.0 if s > 100 else 3.0 - s / 50)
    _state(tmp_path / "out" / "checkpoint-400", flat)
    state = tmp_path / "out" / "checkpoint-400" / "trainer_state.json"
    argv = ["--trial-dir", str(state), "--rule", "LossNotDecreasing", "--output-dir",
            str(tmp_path / "rule-output"), "--wait-for-training-end", "false"]  # fmt: skip
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((tmp_path / "rule-output" / "rule_evaluation_result.json").read_text())
    assert code == 1 and result["rules"][0]["status"] == "IssuesFound", result["rules"][0]
    assert result["trial"] == str(state.parent)
