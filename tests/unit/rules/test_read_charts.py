"""The charts of what a rule reads (evaluator.rules.read_charts): sampled by step, firing
steps, the first and the last kept, figures from what was read, nothing read again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules import Rule, invoke_rule
from evaluator.rules.read_charts import SAMPLED_STEPS, ReadCharts, figures
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from evaluator.trial.tensor import Tensor


def test_figures_of_arrays_scalars_and_reductions() -> None:
    """An array is charted as mean |value| (one numpy call for alike arrays, a tensor read
    twice once), a scalar as its value, reductions as themselves; the rest is left out."""
    a = np.array([-1.0, 3.0], np.float32)
    b = np.array([[2, -4]], np.int8)
    found = figures(
        ["a", "b", "a", "s", "r", "t", "n"],
        [a, b, a, np.float32(7), {("mean", True): 0.5, ("max", False): 2.0}, np.array(["x"]), None],
    )
    assert sorted(found) == [
        ("a", "mean |value|", 2.0),
        ("b", "mean |value|", 3.0),
        ("r", "abs mean", 0.5),
        ("r", "max", 2.0),
        ("s", "value", 7.0),
    ]
    alike = figures(["x", "y", "x"], [a, -2 * a, a])
    assert alike == [("x", "mean |value|", 2.0), ("y", "mean |value|", 4.0)]
    extreme = figures(["i"], [np.array([-128, 0], np.int8)])  # abs of int8 -128 overflows
    assert extreme == [("i", "mean |value|", 64.0)]


def test_steps_are_sampled_keeping_first_last_and_firings() -> None:
    """Over many steps a series keeps the reservoir's steps, the first and the last step and
    every firing step, and counts every step read."""
    charts = ReadCharts()
    steps = 5 * SAMPLED_STEPS
    fired = {7, 500, steps - 3}
    for step in range(steps):
        charts.offer(step, "TRAIN", ["w"], [np.full(3, float(step))], step in fired)
    ((series,), left_out) = charts.series()
    assert left_out == 0 and series["count"] == steps and series["mode"] == "TRAIN"
    kept = [s for s, _ in series["points"]]
    assert len(kept) <= SAMPLED_STEPS + len(fired) + 2
    assert {0, steps - 1} | fired <= set(kept)
    assert all(v == s for s, v in series["points"])  # each step's own figure
    again = ReadCharts()
    for step in range(steps):
        again.offer(step, "TRAIN", ["w"], [np.full(3, float(step))], step in fired)
    assert again.series()[0][0]["points"] == series["points"]  # seeded: the same steps


class _ReadsTwice(Rule):
    def invoke_at_step(self, step: int) -> bool:
        w = self.base_trial.tensor("w")
        w.value(step)
        if step:
            w.value(step - 1)  # another step: counted, not charted
        return bool(self.base_trial.tensor("loss").value(step).item() > 2.5)


def test_a_rule_reading_is_charted_without_reading_again(tmp_path: Path, monkeypatch: Any) -> None:
    """Every value the chart shows comes from the rule's own reads: Tensor.value is called
    exactly as often as the rule calls it."""
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([])
    for step in range(4):
        scale = float(step + 1)
        tensors = {"loss": np.float32(scale), "w": np.array([-1.0, 3.0], np.float32) * scale}
        writer.write_step(step, tensors, mode=ModeKeys.TRAIN, mode_step=step)
    writer.end_training()
    calls = []
    value = Tensor.value

    def counted(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.name)
        return value(self, *args, **kwargs)

    monkeypatch.setattr(Tensor, "value", counted)
    rule = _ReadsTwice(create_trial(str(tmp_path / "trial")))
    result = invoke_rule(rule)
    assert list(result.fired_steps) == [2, 3]
    assert len(calls) == 4 + 3 + 4  # w at each step, w at the step before, the loss
    charted = {(s["tensors"][0], s["quantity"]): s for s in rule.evidence.series()["series"]}
    assert charted[("w", "mean |value|")]["points"] == [[0, 2.0], [1, 4.0], [2, 6.0], [3, 8.0]]
    assert charted[("loss", "value")]["count"] == 4
    assert rule.evidence.reads == 11


class _FailsAtOne(Rule):
    def invoke_at_step(self, step: int) -> bool:
        self.base_trial.tensor("w").value(step)
        if step == 1:
            raise RuntimeError("the rule's own bug")
        return False


def test_reads_of_a_step_that_raised_are_counted_and_charted_at_it(tmp_path: Path) -> None:
    """A step whose evaluation raised leaves its reads behind: the next step charts them at
    their own step, and they count as reads at once."""
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([])
    for step in range(3):
        tensors = {"w": np.array([1.0, -1.0], np.float32) * (step + 1)}
        writer.write_step(step, tensors, mode=ModeKeys.TRAIN, mode_step=step)
    writer.end_training()
    rule = _FailsAtOne(create_trial(str(tmp_path / "trial")))
    for step in range(3):
        try:
            rule.invoke(step)
        except RuntimeError:
            assert rule.evidence.reads == 2
    (series,) = rule.evidence.series()["series"]
    assert series["points"] == [[0, 1.0], [1, 2.0], [2, 3.0]] and series["count"] == 3
