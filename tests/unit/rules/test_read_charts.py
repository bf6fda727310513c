"""The charts of what a rule reads (evaluator.rules.read_charts): sampled by step, firing
steps, the first and the last kept, figures from what was read, nothing read again."""

from __future__ import annotations

import math
import random
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.engine.reads import observe_reads
from evaluator.modes import ModeKeys
from evaluator.rules import Rule, invoke_rule, read_charts, read_watch
from evaluator.rules.evidence import Evidence
from evaluator.rules.read_charts import MAX_READS_CHARTED, SAMPLED_STEPS, ReadCharts
from evaluator.rules.read_figures import STACK_BYTES, figures, mean_abs
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
    assert sorted(found.rows()) == [
        ("a", "mean |value|", 2.0),
        ("b", "mean |value|", 3.0),
        ("r", "abs mean", 0.5),
        ("r", "max", 2.0),
        ("s", "value", 7.0),
    ]
    alike = figures(["x", "y", "x"], [a, -2 * a, a])
    assert list(alike.rows()) == [("x", "mean |value|", 2.0), ("y", "mean |value|", 4.0)]
    extreme = figures(["i"], [np.array([-128, 0], np.int8)])  # abs of int8 -128 overflows
    assert list(extreme.rows()) == [("i", "mean |value|", 64.0)]


def test_mean_abs_of_large_arrays_a_slice_at_a_time() -> None:
    """Arrays too large to stack are summed a slice at a time: the same mean |value| as
    numpy's over the whole array (float16 summed without overflow, integers without the
    overflow of abs), for sizes that are no multiple of a slice."""
    rng = np.random.default_rng(3)
    size = STACK_BYTES // 4 + 12_345  # two of them are past the stacking bound (float16: 2 B)
    for dtype in (np.float16, np.float32, np.float64):
        arrays = [(rng.standard_normal(size) * 300).astype(dtype) for _ in range(2)]
        found = mean_abs(arrays)
        expected = [float(np.abs(a.astype(np.float64)).mean()) for a in arrays]
        assert np.allclose(found, expected, rtol=1e-5), dtype
    ints = [np.full(size, -128, np.int8), np.arange(size, dtype=np.int64) - size // 2]
    assert np.allclose(mean_abs(ints), [128.0, np.abs(ints[1]).mean()], rtol=1e-12)
    large = rng.standard_normal((2, size - size % 5)).astype(np.float32)
    alike = figures(["a", "b"], [large[0].reshape(-1, 5), large[1].reshape(-1, 5)])
    assert alike.names == ["a", "b"] and alike.quantities == "mean |value|"
    assert np.allclose(alike.values, np.abs(large).mean(axis=1), rtol=1e-5)


def test_a_kept_step_holds_no_array_after_it() -> None:
    """A sampled step's figures are computed when it is offered: no array it read is held
    once the step is charted (the memory is used again at the next step)."""
    evidence = Evidence("Mine", _NoModes())
    evidence.watch_reads()
    evidence.evaluating(0)  # the first step: always sampled
    arrays = [np.full(8, float(i)) for i in range(3)]
    for i, array in enumerate(arrays):
        evidence.note_read(f"t{i}", 0, array)
    assert evidence._values  # held while the step is evaluated
    watched = [weakref.ref(array) for array in arrays]
    evidence.chart_reads(0)
    del arrays, array
    assert all(ref() is None for ref in watched)
    series = {s["tensors"][0]: s["points"] for s in evidence.series()["series"]}
    assert series == {"t0": [[0, 0.0]], "t1": [[0, 1.0]], "t2": [[0, 2.0]]}


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


class _ReadsMany(Rule):
    """Reads every tensor of the step before, then every tensor of its own step."""

    def invoke_at_step(self, step: int) -> bool:
        names = sorted(self.base_trial.tensor_names())
        if step:
            for name in names:
                self.base_trial.tensor(name).value(step - 1)
        for name in names:
            self.base_trial.tensor(name).value(step)
        return False


def _wide_trial(path: Path, tensors: int, size: int = 2) -> Any:
    writer = TrialWriter(path)
    writer.write_collections([])
    for step in range(2):
        values = {f"t{i:03d}": np.full(size, float(i + step), np.float32) for i in range(tensors)}
        writer.write_step(step, values, mode=ModeKeys.TRAIN, mode_step=step)
    writer.end_training()
    return create_trial(str(path))


def test_reads_of_another_step_and_past_the_bound_are_counted_not_charted(tmp_path: Path) -> None:
    """However many reads of another step come first, the evaluated step's reads are charted
    (up to MAX_READS_CHARTED of them); every read is counted."""
    tensors = MAX_READS_CHARTED + 50
    rule = _ReadsMany(_wide_trial(tmp_path / "trial", tensors))
    invoke_rule(rule)
    assert rule.evidence.reads == tensors + 2 * tensors
    charted = {s["tensors"][0]: s["points"] for s in rule.evidence.series()["series"]}
    assert len(charted) == MAX_READS_CHARTED
    first = sorted(charted)[0]
    assert charted[first] == [[0, 0.0], [1, 1.0]]  # the step's own values, not the step before


def test_arrays_past_the_held_bytes_are_counted_not_charted(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A step's reads hold at most HELD_BYTES of arrays (checked every few reads, sooner when
    the arrays are large): past it a read is counted, and charted at no step."""
    monkeypatch.setattr(read_watch, "HELD_BYTES", 10 * 4000)
    rule = _ReadsMany(_wide_trial(tmp_path / "trial", 40, size=1000))
    invoke_rule(rule)
    assert rule.evidence.reads == 40 + 2 * 40
    charted = {s["tensors"][0] for s in rule.evidence.series()["series"]}
    assert 10 <= len(charted) <= 10 + 4  # the bound, overrun by at most one check's reads


class _NoModes:
    """A trial stand-in that knows no modes (Evidence asks for a step's mode)."""

    def mode_modestep(self, step: int) -> tuple[None, None]:
        return None, None


def test_a_step_the_charts_do_not_sample_holds_nothing(monkeypatch: Any) -> None:
    """Which steps are charted is drawn before each step: while a step the reservoir does not
    take is evaluated, no array it reads is held (only counted); the sampled steps are
    charted with their own values, and every read is counted."""
    monkeypatch.setattr(read_charts, "RECENT_SECONDS", 1e9)  # no recent step but the first
    evidence = Evidence("Mine", _NoModes())
    evidence.watch_reads()
    steps, held_at = 10 * SAMPLED_STEPS, []
    for step in range(steps):
        evidence.evaluating(step)
        with observe_reads(evidence.note_read):
            for name in ("a", "b"):
                evidence.note_read(name, step, np.full(4, float(step)))
        if any(v is not None for v in evidence._values):
            held_at.append(step)
        evidence.chart_reads(step, fired=step % 7 == 0)
    assert evidence.reads == 2 * steps
    assert held_at[:SAMPLED_STEPS] == list(range(SAMPLED_STEPS))  # the reservoir fills first
    # then fewer and fewer: a reservoir of k takes about k (1 + ln(n / k)) of n items
    assert SAMPLED_STEPS < len(held_at) < SAMPLED_STEPS * (2 + math.log(steps / SAMPLED_STEPS))
    series = {s["tensors"][0]: s for s in evidence.series(limit=None)["series"]}
    assert series["a"]["count"] == steps
    charted = [step for step, _ in series["a"]["points"]]
    assert set(charted) <= set(held_at) and len(charted) >= SAMPLED_STEPS
    assert all(value == step for step, value in series["a"]["points"])


def test_the_recent_step_is_charted_when_its_time_has_come(monkeypatch: Any) -> None:
    """Once RECENT_SECONDS have passed since the last step held, the next step is held too
    and charted as the recent one: the chart ends at the rule's last step."""
    monkeypatch.setattr(read_charts, "RECENT_SECONDS", 0.0)
    evidence = Evidence("Mine", _NoModes())
    evidence.watch_reads()
    steps = 3 * SAMPLED_STEPS
    for step in range(steps):
        evidence.evaluating(step)
        evidence.note_read("a", step, np.full(2, float(step)))
        evidence.chart_reads(step)
    (series,) = evidence.series(limit=None)["series"]
    assert series["points"][-1] == [steps - 1, float(steps - 1)]


def _final_sample(size: int, known: int, total: int, seed: int) -> list[int]:
    """The items a reservoir holds after ``total`` items, told ``known`` ahead (0: not told),
    and checks that no item it selected among the known ones is replaced there."""
    reservoir = read_charts._Reservoir(size, random.Random(seed))
    reservoir.expect(known)
    sample: list[int] = []
    for item in range(total):
        slot = reservoir.take()
        if slot < 0:
            continue
        if slot == len(sample):
            sample.append(item)
        else:
            assert item >= known, "an item selected among the known ones was replaced"
            sample[slot] = item
    return sample


def test_a_reservoir_told_the_count_holds_only_what_it_keeps() -> None:
    """Told how many items come, the reservoir takes exactly ``size`` of them and replaces
    none; past them it goes on as a reservoir; either way every item is as likely to be in
    the final sample (size / items seen), as a reservoir that was not told."""
    taken = [_final_sample(8, 40, 40, seed) for seed in range(50)]
    assert all(len(sample) == 8 == len(set(sample)) for sample in taken)
    trials = 3000
    for known, total in ((40, 40), (40, 80), (0, 80)):
        seen = Counter(i for seed in range(trials) for i in _final_sample(8, known, total, seed))
        expected = 8 / total  # the standard error at 3000 trials is at most about 0.0073
        assert max(abs(seen[i] / trials - expected) for i in range(total)) < 0.035, (known, total)


class _ReadsOne(Rule):
    def invoke_at_step(self, step: int) -> bool:
        self.base_trial.tensor("w").value(step)
        return False


def test_invoke_rule_tells_the_charts_how_many_steps_come(tmp_path: Path, monkeypatch: Any) -> None:
    """invoke_rule says how many of the trial's steps it will evaluate ([start, end)): the
    read charts hold the reads of SAMPLED_STEPS steps (and the first), not of every step a
    reservoir would take only to replace it later; the chart keeps as many points."""
    monkeypatch.setattr(read_charts, "RECENT_SECONDS", 1e9)  # no recent step but the first
    steps = 3 * SAMPLED_STEPS
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([])
    for step in range(steps + 10):
        writer.write_step(step, {"w": np.full(2, float(step), np.float32)})
    writer.end_training()
    held: list[bool] = []
    plan = read_charts.ReadCharts.plan

    def counted(self: read_charts.ReadCharts, step: int, now: float) -> bool:
        held.append(plan(self, step, now))
        return held[-1]

    monkeypatch.setattr(read_charts.ReadCharts, "plan", counted)
    rule = _ReadsOne(create_trial(str(tmp_path / "trial")))
    invoke_rule(rule, start_step=5, end_step=steps + 5)
    assert len(held) == steps and SAMPLED_STEPS <= sum(held) <= SAMPLED_STEPS + 1
    (series,) = rule.evidence.series(limit=None)["series"]
    assert series["count"] == steps and len(series["points"]) == sum(held)
    assert all(5 <= s < steps + 5 and v == s for s, v in series["points"])
