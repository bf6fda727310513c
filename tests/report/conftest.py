"""Runs whose reports the tests read: a firing VanishingGradient, a quiet one, an Error (a
selection that matches nothing) and several rules at once, on a short fading-gradient trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.harness import ReportRun, evaluate_with_report
from tests.report.trials import write_fading_gradients

SHORT_STEPS, SHORT_VANISHES_AT = 80, 50


@pytest.fixture(scope="session")
def fading_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """80 steps of 6 gradients; gradients/dense_0/kernelGrad vanishes at step 50."""
    root = tmp_path_factory.mktemp("fading") / "trial"
    return write_fading_gradients(root, steps=SHORT_STEPS, vanishes_at=SHORT_VANISHES_AT)


def _run(factory: pytest.TempPathFactory, trial: Path, *argv: str) -> ReportRun:
    return evaluate_with_report(["--trial-dir", str(trial), *argv], factory.mktemp("out"))


@pytest.fixture(scope="session")
def firing_run(tmp_path_factory: pytest.TempPathFactory, fading_trial: Path) -> ReportRun:
    """VanishingGradient fires at step 50."""
    return _run(tmp_path_factory, fading_trial, "--rule", "VanishingGradient")


@pytest.fixture(scope="session")
def quiet_run(tmp_path_factory: pytest.TempPathFactory, fading_trial: Path) -> ReportRun:
    """VanishingGradient with threshold 1e-9: NoIssuesFound."""
    return _run(
        tmp_path_factory, fading_trial, "--rule", "VanishingGradient", "--threshold", "1e-9"
    )


@pytest.fixture(scope="session")
def error_run(tmp_path_factory: pytest.TempPathFactory, fading_trial: Path) -> ReportRun:
    """AllZero with a regex that matches no tensor: Error, checked nothing."""
    return _run(tmp_path_factory, fading_trial, "--rule", "AllZero", "--tensor_regex", "relu_out.*")


@pytest.fixture(scope="session")
def several_run(tmp_path_factory: pytest.TempPathFactory, fading_trial: Path) -> ReportRun:
    """VanishingGradient, ExplodingTensor and AllZero (no selection: Error) in one run."""
    return _run(tmp_path_factory, fading_trial, "--rule", "VanishingGradient,ExplodingTensor")
