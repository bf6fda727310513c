"""Fixtures shared by the built-in rule tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from tests.support.keras_like import write_keras_like


@pytest.fixture
def opened_trials() -> Iterator[list[Any]]:
    """Trials a test opened, closed after it."""
    opened: list[Any] = []
    yield opened
    for trial in opened:
        trial.close()


@pytest.fixture
def make_trial(tmp_path: Path, opened_trials: list[Any]) -> Callable[..., Any]:
    """``make_trial({step: {name: array}})``: an ended trial, closed after the test."""

    def make(steps: Mapping[int, Mapping[str, object]]) -> Any:
        root = tmp_path / f"trial{len(opened_trials)}"
        writer = TrialWriter(root)
        writer.write_collections([])
        for step, tensors in steps.items():
            writer.write_step(step, tensors)
        writer.end_training()
        opened_trials.append(create_trial(str(root)))
        return opened_trials[-1]

    return make


@pytest.fixture
def keras_like(tmp_path: Path, opened_trials: list[Any]) -> Callable[..., Any]:
    """``keras_like(kind, **layout)``: an open trial from ``write_keras_like`` (Keras' layout:
    TRAIN/EVAL interleaved, running-mean loss, epoch-end duplicate logs)."""

    def make(kind: str = "healthy", **layout: int) -> Any:
        root = write_keras_like(tmp_path / f"{kind}{len(opened_trials)}", kind, **layout)
        opened_trials.append(create_trial(str(root)))
        return opened_trials[-1]

    return make
