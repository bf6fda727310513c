"""The training code records, independently of any rule, the first step each fault is
measurable (bench/detection.py's onsets), and records none of the faults on the healthy run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenarios.training import ONSET_FILE, SCENARIOS, train

FAULTS = ("nonfinite", "vanishing_gradient", "dead_relu_over_50pct", "weights_unchanged")


def _onsets(name: str, root: Path) -> dict[str, int | None]:
    return json.loads((train(SCENARIOS[name], root / name) / ONSET_FILE).read_text())


@pytest.mark.parametrize(
    ("scenario", "fault"),
    [
        ("exploding", "nonfinite"),
        ("vanishing_gradients", "vanishing_gradient"),
        ("dead_relu", "dead_relu_over_50pct"),
        ("saturated_tanh", "saturated_over_50pct"),
        ("lr_zero", "weights_unchanged"),
    ],
)
def test_each_fault_has_an_onset(tmp_path: Path, scenario: str, fault: str) -> None:
    """Each faulty scenario records the step its fault became measurable."""
    assert isinstance(_onsets(scenario, tmp_path).get(fault), int)


def test_healthy_run_records_no_fault(tmp_path: Path) -> None:
    """The healthy run records none of the faults, and its loss keeps really falling."""
    onsets = _onsets("healthy", tmp_path)
    assert [f for f in FAULTS if f in onsets] == []
    assert onsets["train_loss_last_real_fall"] > 20


def test_lr_zero_loss_never_falls(tmp_path: Path) -> None:
    """With learning rate 0 the whole-set loss never really falls: its last fall is step 0."""
    assert _onsets("lr_zero", tmp_path)["train_loss_last_real_fall"] == 0
