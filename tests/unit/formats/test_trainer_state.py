"""trainer_state.json read as the Trainer's TensorBoard callback logs the same run
(evaluator.formats.trainer_state): on the 51 real runs of wild-hf-dev, whose TensorBoard logs
Hugging Face's own callback wrote from the same log_history, the tags, steps and values equal
the log's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluator.formats.trainer_state import TrainerStateError, parse_trainer_state, tag_of
from evaluator.testing.tb_writer import read_scalars
from tests.support.real_runs import WILD

RAW = sorted((WILD / "raw").glob("*.json")) if (WILD / "raw").is_dir() else []


def test_keys_map_to_the_callbacks_tags() -> None:
    assert tag_of("loss") == "train/loss"
    assert tag_of("grad_norm") == "train/grad_norm"
    assert tag_of("eval_loss") == "eval/loss"
    assert tag_of("eval_rouge-1") == "eval/rouge-1"
    assert tag_of("test_accuracy") == "test/accuracy"
    assert tag_of("train_runtime") == "train/train_runtime"
    assert tag_of("evaluation") == "train/evaluation"  # no underscore after the phase


def test_a_state_is_read_in_log_order_with_non_finite_numbers_and_the_end() -> None:
    history = [
        {"loss": 2.5, "grad_norm": "NaN-as-text", "learning_rate": 1e-4, "epoch": 0.5, "step": 10},
        {"eval_loss": 2.0, "eval_note": "text", "step": 10},
        {"loss": 0.0, "grad_norm": float("nan"), "step": 20},
        {"custom": 1.0},  # added by hand: no step
        {"train_runtime": 12.5, "train_loss": 1.2, "total_flos": 10**400, "step": 20},
    ]
    text = json.dumps({"global_step": 20, "max_steps": 40, "log_history": history})
    assert "NaN" in text  # Python's json, as the Trainer writes it
    state = parse_trainer_state(text.encode(), source="trainer_state.json")
    assert state.scalars[:4] == [
        ("train/loss", 10, 2.5),
        ("train/learning_rate", 10, 1e-4),
        ("train/epoch", 10, 0.5),
        ("eval/loss", 10, 2.0),
    ]
    nan = [v for t, s, v in state.scalars if t == "train/grad_norm"]
    assert len(nan) == 1 and math.isnan(nan[0])
    assert ("train/total_flos", 20, math.inf) in state.scalars
    assert (state.global_step, state.max_steps, state.finished, state.skipped) == (20, 40, True, 1)
    unfinished = parse_trainer_state(json.dumps({"log_history": history[:3]}).encode(), source="x")
    assert not unfinished.finished


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"{not json", "is not JSON"),
        (b"[]", "no log_history list"),
        (b'{"log_history": {"step": 1}}', "no log_history list"),
        (b'{"log_history": [1, 2]}', "log_history[0] is not an object"),
        (b"\xff\xfe", "is not JSON"),
    ],
)
def test_a_malformed_state_names_the_file_and_what_is_wrong(data: bytes, says: str) -> None:
    with pytest.raises(TrainerStateError) as caught:
        parse_trainer_state(data, source="out/checkpoint-500/trainer_state.json")
    assert "out/checkpoint-500/trainer_state.json" in str(caught.value) and says in str(
        caught.value
    )


@pytest.mark.skipif(not RAW, reason=f"no wild-hf-dev runs at {WILD}")
@pytest.mark.parametrize("raw", RAW, ids=[p.stem for p in RAW])
def test_a_real_state_reads_as_its_tensorboard_log(raw: Path) -> None:
    """Every (tag, step) of the TensorBoard log the Trainer's callback wrote, with its value
    (float32, as the log holds it), and nothing else."""
    state = parse_trainer_state(raw.read_bytes(), source=str(raw))
    ours = {(tag, step): float(np.float32(value)) for tag, step, value in state.scalars}
    logged: dict[tuple[str, int], float] = {}
    run = WILD / "tb" / raw.stem
    for folder in sorted({p.parent for p in run.rglob("events.out.tfevents.*")}):
        for tag, values in read_scalars(folder).items():
            logged.update(((tag, step), value) for step, value, _ in values)
    assert set(ours) == set(logged)
    differ = [
        k
        for k in ours
        if ours[k] != logged[k] and not (math.isnan(ours[k]) and math.isnan(logged[k]))
    ]
    assert differ == []
