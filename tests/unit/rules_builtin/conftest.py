"""Fixtures shared by the built-in rule tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
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
    """``make_trial({step: {name: array}}, ...)``: an ended trial, closed after the test.

    Keywords: ``collections`` (written to the collections file), ``modes`` ({step: (mode,
    mode_step)}; GLOBAL otherwise), ``reductions`` / ``shapes`` ({step: {name: ...}}, as
    ``TrialWriter.write_step`` takes them) and ``name`` (the trial's). A test module whose
    trials share a layout overrides this fixture with a thin wrapper around it."""

    def make(
        steps: Mapping[int, Mapping[str, object]],
        *,
        collections: Sequence[Collection] = (),
        modes: Mapping[int, tuple[ModeKeys, int]] | None = None,
        reductions: Mapping[int, Mapping[str, Mapping[str, object]]] | None = None,
        shapes: Mapping[int, Mapping[str, tuple[int, ...]]] | None = None,
        name: str | None = None,
    ) -> Any:
        root = tmp_path / f"trial{len(opened_trials)}"
        writer = TrialWriter(root)
        writer.write_collections(list(collections))
        for step, tensors in steps.items():
            mode, mode_step = (modes or {}).get(step, (ModeKeys.GLOBAL, step))
            writer.write_step(
                step,
                tensors,
                mode=mode,
                mode_step=mode_step,
                reductions=(reductions or {}).get(step),
                shapes=(shapes or {}).get(step),
            )
        writer.end_training()
        opened_trials.append(create_trial(str(root), name=name))
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
