"""``Tensor`` over its ``TrialView`` alone: no Trial internals needed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from evaluator.errors import StepNotYetAvailable, StepUnavailable, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.trial.tensor import Tensor

TRAIN, GLOBAL = ModeKeys.TRAIN, ModeKeys.GLOBAL


def test_a_tensor_answers_through_its_view_with_a_bare_trial(engine: Any) -> None:
    """Values, computed reductions, steps and workers need nothing of the Trial but its name."""
    e = engine(prefetch_steps=0)
    e.write(0, 1, 2)
    e.end()
    e.poll()
    t = Tensor("b", SimpleNamespace(name="job"), view=e.view)  # type: ignore[arg-type]
    assert (t.value(1) == e.value_of("b", 1)).all()
    assert (t.value(1, mode=TRAIN) == e.value_of("b", 1)).all()
    assert t.reduction_value(2, "min") == e.value_of("b", 2).min()
    assert t.steps() == [0, 1, 2] and t.steps(mode=TRAIN) == [0, 1, 2]
    assert t.workers(2) == ["worker_0"] and t.workers(2, mode=TRAIN) == ["worker_0"]
    assert t.prev_steps(2, n=1) == [2]
    assert repr(t) == "<Tensor name='b' trial='job'>"


def test_a_missing_step_asks_the_view_to_refresh_once_then_decides(engine: Any) -> None:
    """A step the state does not know makes the tensor refresh once through the view, then
    answer from smdebug's decision table: still to come, skipped, or not saved for this tensor."""
    e = engine(prefetch_steps=0)
    e.write(0, 2)
    e.poll()
    refreshed: list[str] = []
    view = e.view_with(refreshed.append)
    t = Tensor("a", SimpleNamespace(name="job"), view=view)  # type: ignore[arg-type]
    with pytest.raises(StepNotYetAvailable):
        t.value(3)
    assert refreshed == ["a"]
    with pytest.raises(StepUnavailable):
        t.value(1)
    e.writer.write_step(3, {"other": e.value_of("a", 3)})
    e.sync()
    e.poll()
    with pytest.raises(TensorUnavailableForStep):
        t.value(3)
    assert refreshed == ["a", "a", "a"]


def test_a_tensor_is_made_with_a_view() -> None:
    """A Tensor cannot be built without the view its trial hands out (``trial.tensor(name)``)."""
    with pytest.raises(TypeError):
        Tensor("a", SimpleNamespace(name="job"))  # type: ignore[call-arg]
