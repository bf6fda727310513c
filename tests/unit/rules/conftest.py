"""Trials for the rule-framework tests, written with evaluator.testing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial

COLLECTIONS = [
    Collection("weights", include_regex=["^w"]),
    Collection("losses", tensor_names={"loss"}),
]


def write_steps(root: Path, steps: Iterable[int], *, ended: bool = True) -> None:
    """Steps holding ``w`` (a 2x2 array of the step number) and ``loss`` (1 / (step + 1))."""
    writer = TrialWriter(root)
    writer.write_collections(COLLECTIONS)
    for s in steps:
        writer.write_step(
            s,
            {"w": np.full((2, 2), s, np.float32), "loss": np.float32(1 / (s + 1))},
            mode=ModeKeys.TRAIN,
        )
    if ended:
        writer.end_training()


@pytest.fixture
def make_trial(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_trial(steps, ended=True, **options)``: a trial with those saved steps, closed after
    the test."""
    opened: list[Any] = []

    def make(
        steps: Iterable[int], *, ended: bool = True, name: str = "trial", **options: Any
    ) -> Any:
        root = tmp_path / name
        write_steps(root, steps, ended=ended)
        trial = create_trial(str(root), **options)
        opened.append(trial)
        return trial

    yield make
    for trial in opened:
        trial.close()
