"""TensorSelection: the names a rule checks at a step, the same when asked again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.kit.selection import TensorSelection


class _Trial:
    """Just what a selection asks of a trial: names per step, all names, collections."""

    def __init__(self, at: dict[int, list[str]], collections: dict[str, Any]) -> None:
        self.at = at
        self._collections = collections

    def tensor_names(
        self, *, step: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL
    ) -> list[str]:
        if step is None:
            return sorted({n for names in self.at.values() for n in names})
        return sorted(self.at.get(step, []))

    def collections(self) -> dict[str, Any]:
        return self._collections


def _collection(names: list[str], include: list[str] | None = None) -> Any:
    return SimpleNamespace(tensor_names=set(names), include_regex=include)


def test_a_selection_asked_at_every_step_answers_for_that_steps_names() -> None:
    """Steps saving the same names get the same answer, steps saving others their own; the
    lists handed out are the caller's to change; a collection added meanwhile counts."""
    at = {s: ["w1", "w2", "loss"] if s % 2 else ["w1", "loss", "g"] for s in range(6)}
    coll = {"weights": _collection(["w1", "w2"]), "grads": _collection([], include=["^g$"])}
    trial = _Trial(at, coll)
    by_regex = TensorSelection("R", None, "^w")
    by_collection = TensorSelection("R", "weights,grads", None)
    for step in range(6):
        expected = ["w1", "w2"] if step % 2 else ["w1"]
        got = by_regex.names(trial, step=step)
        assert got == expected
        got.append("changed")  # the caller's list
        assert by_regex.names(trial, step=step) == expected
        assert by_collection.names(trial, step=step) == (["w1", "w2"] if step % 2 else ["g", "w1"])
    by_later = TensorSelection("R", "more", None)
    assert by_later.names(trial, step=1) == []  # no such collection yet
    coll["more"] = _collection(["loss"])
    assert by_later.names(trial, step=1) == ["loss"]
    other = _Trial({1: ["w2"]}, coll)  # another trial with other names at the step
    assert by_regex.names(other, step=1) == ["w2"] and by_regex.names(trial, step=1) == ["w1", "w2"]
