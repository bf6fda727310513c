"""Fixtures shared by the built-in rule tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from evaluator.testing import TrialWriter
from evaluator.trial import create_trial


@pytest.fixture
def make_trial(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_trial({step: {name: array}})``: an ended trial, closed after the test."""
    opened: list[Any] = []

    def make(steps: Mapping[int, Mapping[str, object]]) -> Any:
        root = tmp_path / f"trial{len(opened)}"
        writer = TrialWriter(root)
        writer.write_collections([])
        for step, tensors in steps.items():
            writer.write_step(step, tensors)
        writer.end_training()
        trial = create_trial(str(root))
        opened.append(trial)
        return trial

    yield make
    for trial in opened:
        trial.close()
