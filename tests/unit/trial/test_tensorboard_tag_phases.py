"""Phase words in TensorBoard tags (docs/tensorboard.md, "Phase words in tags"): Hugging Face's
``train/loss`` + ``eval/loss``, PyTorch's tutorial ``Loss/train`` + ``Loss/test`` and
Lightning's ``train_loss`` + ``val_loss`` in one folder read as one tensor at TRAIN and EVAL
steps; the option turns it off; ``summary`` shows the mapping."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from evaluator.formats.tensorboard.summary import phase_of_tag
from evaluator.modes import ModeKeys
from evaluator.summary import format_summary, summarize
from evaluator.trial import create_trial
from tests.support.tb_logs import torch_style

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("train/loss", ("loss", TRAIN)),
        ("eval/loss", ("loss", EVAL)),
        ("Loss/train", ("Loss", TRAIN)),
        ("Loss/test", ("Loss", EVAL)),
        ("train_loss", ("loss", TRAIN)),
        ("val_loss", ("loss", EVAL)),
        ("loss_val", ("loss", EVAL)),
        ("Validation-Loss", ("Loss", EVAL)),
        ("metrics/val_acc", ("metrics/acc", EVAL)),
        ("train/train_loss", ("train_loss", TRAIN)),
        ("epoch_loss", None),
        ("loss", None),
        ("train", None),
        ("grad_2.0_norm/fc1.weight", None),
        ("sequential/dense/kernel/histogram", None),
        ("trainer_loss", None),
        ("train_loss_step", ("loss", TRAIN)),  # Lightning's on_step=True, on_epoch=True
        ("train_loss_epoch", ("loss_epoch", TRAIN)),
        ("val_loss_step", ("loss", EVAL)),
        ("train_step", ("step", TRAIN)),
    ],
)
def test_phase_of_tag(tag: str, expected: tuple[str, ModeKeys] | None) -> None:
    """A phase word as the first or last path component, or first or last word of the last
    component, gives the tensor without it and its mode; other tags have none."""
    assert phase_of_tag(tag) == expected


def _hf(folder: Path) -> Path:
    return torch_style(
        folder,
        scalars={
            "train/loss": [(s, 1.0 - s / 20) for s in range(1, 6)],
            "eval/loss": [(s, 1.5 + s / 20) for s in range(1, 6)],
            "train/learning_rate": [(s, 0.01) for s in range(1, 6)],
            "epoch": [(s, float(s)) for s in range(1, 6)],
        },
    )


def test_one_folder_with_phase_words_has_train_and_eval_steps(tmp_path: Path) -> None:
    """Hugging Face's train/loss and eval/loss are the tensor 'loss' at TRAIN and EVAL mode
    steps (the event steps), EVAL after TRAIN at each step; other tags are TRAIN."""
    with create_trial(str(_hf(tmp_path / "run"))) as trial:
        assert sorted(trial.tensor_names()) == ["epoch", "learning_rate", "loss"]
        loss = trial.tensor("loss")
        assert loss.steps(mode=TRAIN) == [1, 2, 3, 4, 5] == loss.steps(mode=EVAL)
        assert float(loss.value(2, mode=TRAIN)) == pytest.approx(0.9)
        assert float(loss.value(2, mode=EVAL)) == pytest.approx(1.6)
        assert trial.steps() == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        assert trial.mode_modestep(5) == (EVAL, 2)
        assert trial.tensor("epoch").steps(mode=TRAIN) == [1, 2, 3, 4, 5]
        assert trial.tensor_names(collection="losses") == ["loss"]
        assert trial.tensorboard_mapping.phases


def test_the_mapping_tags_make_is_logged_when_decided(tmp_path: Path) -> None:
    """Reading the first steps of a run with phase words logs tensorboard_mapping with the tags
    read by their phase word (evaluation_started shows the mapping from file names only)."""
    with capture_logs() as logs, create_trial(str(_hf(tmp_path / "run"))) as trial:
        trial.steps()
    said = [e["mapping"] for e in logs if e["event"] == "tensorboard_mapping"]
    assert len(said) == 1
    assert "folders . -> TRAIN" in said[0] and "eval/loss -> loss (EVAL)" in said[0]


def test_tutorial_and_lightning_idioms(tmp_path: Path) -> None:
    """Loss/train + Loss/test, and train_loss + val_loss, pair up the same way."""
    torch_style(tmp_path / "a", scalars={"Loss/train": [(0, 1.0)], "Loss/test": [(0, 2.0)]})
    torch_style(tmp_path / "b", scalars={"train_loss": [(3, 1.0)], "val_loss": [(3, 2.0)]})
    with create_trial(str(tmp_path / "a")) as trial:
        assert float(trial.tensor("Loss").value(0, mode=EVAL)) == 2.0
    with create_trial(str(tmp_path / "b")) as trial:
        assert float(trial.tensor("loss").value(3, mode=TRAIN)) == 1.0
        assert float(trial.tensor("loss").value(3, mode=EVAL)) == 2.0


def test_lightnings_step_and_epoch_series_pair_with_its_validation_loss(tmp_path: Path) -> None:
    """A LightningModule that logs the training loss on_step and on_epoch writes
    train_loss_step and train_loss_epoch beside val_loss: the per-step series and val_loss are
    the tensor 'loss' at TRAIN and EVAL steps, so Overfit finds both; the epoch series stays
    apart as 'loss_epoch'. Overfit fires on such a run whose validation loss rises."""
    from evaluator.rules import invoke_rule
    from evaluator.rules.loader import build_rule
    from rules_builtin import registry

    steps = range(0, 400, 10)
    torch_style(
        tmp_path,
        scalars={
            "train_loss_step": [(s, 2.0 * 0.99 ** (s / 10)) for s in steps],
            "train_loss_epoch": [(s, 1.0) for s in steps if s % 50 == 40],
            "val_loss": [(s, 1.0 + (s - 150) ** 2 / 20000) for s in steps if s % 50 == 0],
        },
    )
    with create_trial(str(tmp_path), idle_scans_to_complete=1, poll_interval=0.05) as trial:
        assert {"loss", "loss_epoch"} <= set(trial.tensor_names())
        loss = trial.tensor("loss")
        assert loss.steps(mode=TRAIN)[:2] == [0, 10] and loss.steps(mode=EVAL)[:2] == [0, 50]
        rule = build_rule(registry.lookup("Overfit"), trial, {})
        fired = invoke_rule(rule, raise_eval_cond=False).fired_steps
    assert fired, "Overfit should fire: the validation loss rose 60 % while training fell"


def test_a_run_without_phase_words_keeps_global_steps(tmp_path: Path) -> None:
    """Tags without a phase word leave the run GLOBAL, global step = event step."""
    torch_style(tmp_path, scalars={"loss": [(s, 1.0) for s in range(3)], "epoch_loss": [(0, 1.0)]})
    with create_trial(str(tmp_path)) as trial:
        assert trial.steps() == [0, 1, 2]
        assert trial.mode_modestep(1) == (ModeKeys.GLOBAL, 1)
        assert not trial.tensorboard_mapping.phases


def test_phase_words_can_be_turned_off(tmp_path: Path) -> None:
    """tensorboard_tag_phases=False keeps every tag a GLOBAL tensor of its own."""
    with create_trial(str(_hf(tmp_path / "run")), tensorboard_tag_phases=False) as trial:
        assert "train/loss" in trial.tensor_names() and "loss" not in trial.tensor_names()
        assert trial.mode_modestep(1) == (ModeKeys.GLOBAL, 1)
        assert "phase words in tags not used" in trial.tensorboard_mapping.describe()


def test_summary_shows_how_tags_were_read(tmp_path: Path) -> None:
    """summary's mapping line lists each tag read by its phase word, with its mode."""
    with create_trial(str(_hf(tmp_path / "run"))) as trial:
        text = format_summary(summarize(trial))
    assert "train/loss -> loss (TRAIN)" in text and "eval/loss -> loss (EVAL)" in text
    assert "global step = 2 x event step" in text


def _lightning_live(folder: Path) -> None:
    """What a live Lightning run holds at first (hp_metric at step 0), then its losses."""
    torch_style(folder, scalars={"hp_metric": [(0, -1.0)]})


def _lightning_losses(folder: Path) -> None:
    """The run's next file (a name after the first one's), with its losses."""
    other = torch_style(
        folder.parent / "next", scalars={"train_loss": [(1, 1.0)], "val_loss": [(1, 2.0)]}
    )
    (written,) = other.glob("events.out.tfevents.*")
    written.rename(folder / "events.out.tfevents.9999999999.next")


def test_phase_words_seen_after_the_first_steps_are_named_in_a_warning(tmp_path: Path) -> None:
    """A live run whose first steps have no phase word (auto) keeps later phase-word tags as
    tensors of their own, and says so with tensorboard_tag_phase_ignored."""
    _lightning_live(tmp_path)
    with create_trial(str(tmp_path), idle_scans_to_complete=50, poll_interval=0.01) as trial:
        assert trial.steps() == [0]
        _lightning_losses(tmp_path)
        with capture_logs() as logs:
            trial.refresh_data()
        assert "train_loss" in trial.tensor_names()
        assert trial.mode_modestep(1) == (ModeKeys.GLOBAL, 1)
    warned = [e["tag"] for e in logs if e["event"] == "tensorboard_tag_phase_ignored"]
    assert sorted(warned) == ["train_loss", "val_loss"]


def test_phase_words_set_true_pair_tags_seen_later(tmp_path: Path) -> None:
    """tensorboard_tag_phases=True gives the run phases from its first step, so train_loss
    and val_loss logged after Lightning's hp_metric are one tensor at TRAIN and EVAL steps."""
    _lightning_live(tmp_path)
    with create_trial(
        str(tmp_path), tensorboard_tag_phases=True, idle_scans_to_complete=50, poll_interval=0.01
    ) as trial:
        assert trial.mode_modestep(0) == (TRAIN, 0)
        _lightning_losses(tmp_path)
        trial.refresh_data()
        assert float(trial.tensor("loss").value(1, mode=EVAL)) == 2.0
        assert trial.tensor("loss").steps(mode=TRAIN) == [1]


def test_a_local_log_nothing_wrote_to_for_a_while_is_complete_at_once(tmp_path: Path) -> None:
    """A finished run's log (every event file last written UNCHANGED_SECONDS or more before
    it is opened) has ended: no idle scans are waited for. A fresh one has not."""
    import os
    import time

    from evaluator.sources.tensorboard.source import UNCHANGED_SECONDS

    torch_style(tmp_path / "old", scalars={"train_loss": [(s, 1.0) for s in range(3)]})
    torch_style(tmp_path / "new", scalars={"train_loss": [(s, 1.0) for s in range(3)]})
    long_ago = time.time() - UNCHANGED_SECONDS - 5
    for path in (tmp_path / "old").iterdir():
        os.utime(path, (long_ago, long_ago))
    with create_trial(str(tmp_path / "old")) as trial:
        assert trial.training_ended()
        assert trial.tensor("loss").steps(mode=TRAIN) == [0, 1, 2]
    with create_trial(str(tmp_path / "new")) as trial:
        assert not trial.training_ended()
