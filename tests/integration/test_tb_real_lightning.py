"""A TensorBoard log written by the real ``lightning`` package (Trainer + TensorBoardLogger,
``tests/fixtures/tb_logs/lightning_real_overfit``, made by ``tools/make_tb_logs``): its tags
map as docs/tensorboard.md says, and through the command as a user runs it, Overfit fires on
the overfitting run while the training loss is never found not decreasing. (Every other rule
and every value against EventAccumulator: test_tb_real_writers.py, which reads every fixture
with a labels.json.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluator.modes import ModeKeys
from evaluator.trial import create_trial
from tests.support.evaluator_cli import EvaluatorCli
from tests.support.tb_logs import oracle_values
from tests.support.tb_real_logs import ROOT, labels, tensor_of

pytest.importorskip("tensorboard")

RUN = "lightning_real_overfit"
FOLDER = ROOT / RUN / "lightning_logs" / "version_0"
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def _rule(tmp_path: Path, *args: str) -> dict[str, Any]:
    run = EvaluatorCli(tmp_path)("--trial-dir", str(FOLDER), *args)
    assert run.result is not None, run.describe()
    (rule,) = run.result["rules"]
    return rule


def test_the_log_is_lightnings_own() -> None:
    """Written by lightning's TensorBoardLogger (no imitation) with the tags Lightning names:
    ``self.log("train_loss", on_step=True, on_epoch=True)`` and ``self.log("val_loss")``."""
    want = labels(RUN)
    assert want["writer"] == "lightning.pytorch.loggers.TensorBoardLogger"
    assert want["versions"]["lightning"] == "2.6.6"
    tags = set(oracle_values(FOLDER))
    assert tags == {"train_loss_step", "train_loss_epoch", "val_loss", "epoch", "hp_metric"}


def test_tags_map_as_documented() -> None:
    """train_loss_step -> loss TRAIN, val_loss -> loss EVAL, train_loss_epoch -> loss_epoch
    TRAIN, at the steps Lightning logged them (validation at each epoch's last step)."""
    shown = oracle_values(FOLDER)
    assert tensor_of("train_loss_step", None, True) == ("loss", TRAIN)
    assert tensor_of("val_loss", None, True) == ("loss", EVAL)
    assert tensor_of("train_loss_epoch", None, True) == ("loss_epoch", TRAIN)
    measured = labels(RUN)["measured"]
    per_epoch = measured["steps_per_epoch"]
    epoch_ends = [per_epoch * (e + 1) - 1 for e in range(len(measured["val_loss"]))]
    assert sorted(shown["val_loss"]) == epoch_ends == sorted(shown["train_loss_epoch"])
    assert sorted(shown["train_loss_step"]) == list(range(measured["optimizer_steps"]))
    with create_trial(str(FOLDER)) as trial:
        assert "losses" in trial.collections()
        assert trial.tensor("loss").steps(mode=TRAIN) == sorted(shown["train_loss_step"])
        assert trial.tensor("loss").steps(mode=EVAL) == epoch_ends
        assert trial.tensor("loss_epoch").steps(mode=TRAIN) == epoch_ends
        assert trial.tensor("loss_epoch").steps(mode=EVAL) == []


def test_overfit_fires_through_the_command(tmp_path: Path) -> None:
    """Default parameters: fires at the first training step after a validation pass that no
    longer falls below the best one, with the gap above ratio_threshold as evidence."""
    measured = labels(RUN)["measured"]
    assert measured["overfits"]
    rule = _rule(tmp_path, "--rule", "Overfit")
    assert rule["status"] == "IssuesFound" and rule["exit_code"] == 1
    assert rule["fired_modes"] == ["TRAIN"]
    best = measured["steps_per_epoch"] * (measured["val_best_epoch"] + 1) - 1
    assert rule["step"] > best  # judged only once the validation loss stopped falling
    (reason,) = rule["evidence"]["reasons"]
    assert reason["tensors"] == ["loss"] and reason["value"] > 0.1


def test_training_loss_is_not_found_not_decreasing(tmp_path: Path) -> None:
    """Default parameters: LossNotDecreasing fires on the rising validation loss (EVAL), never
    on the training loss; the per-epoch training loss alone is checked and quiet."""
    rule = _rule(tmp_path, "--rule", "LossNotDecreasing")
    assert rule["status"] == "IssuesFound"
    assert set(rule["fired_modes"]) == {"EVAL"}
    epoch = _rule(
        tmp_path / "epoch",
        "--rule",
        "LossNotDecreasing",
        "--use_losses_collection",
        "false",
        "--tensor_regex",
        "^loss_epoch$",
    )
    assert epoch["status"] == "NoIssuesFound"
    assert epoch["evidence"]["tensors_checked"] == 1 and epoch["evidence"]["comparisons"] > 0


def test_training_loss_followed_alone_is_not_found_not_decreasing(tmp_path: Path) -> None:
    """``mode=TRAIN``: the per-step training loss, falling in every 10-step window (measured:
    ``train_loss_step_stalls_10_step_windows`` false), is not found not decreasing."""
    assert not labels(RUN)["measured"]["train_loss_step_stalls_10_step_windows"]
    rule = _rule(tmp_path, "--rule", "LossNotDecreasing", "--mode", "TRAIN")
    assert rule["status"] == "NoIssuesFound", rule["evidence"]["reasons"]
