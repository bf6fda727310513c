"""Evidence: comparisons, firings with their reasons, the closest approach, read counting."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.engine.reads import observe_reads
from evaluator.modes import ModeKeys
from evaluator.rules import Rule, invoke_rule
from evaluator.rules.evidence import (
    SERIES_BUCKETS,
    Check,
    Evidence,
    Series,
    json_number,
)
from evaluator.rules.series import _higher, _lower
from evaluator.rules.series_set import _QUANTITY_CACHE
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial


@pytest.fixture
def trial(tmp_path: Path) -> Any:
    """A trial with TRAIN steps 0, 1 and an EVAL step 2 (mode step 0) of one tensor."""
    writer = TrialWriter(tmp_path / "t")
    writer.write_collections([])
    writer.write_step(0, {"w": np.ones(3, np.float32)}, mode=ModeKeys.TRAIN, mode_step=0)
    writer.write_step(1, {"w": np.zeros(3, np.float32)}, mode=ModeKeys.TRAIN, mode_step=1)
    writer.write_step(2, {"w": np.ones(3, np.float32)}, mode=ModeKeys.EVAL, mode_step=0)
    writer.end_training()
    opened = create_trial(str(tmp_path / "t"))
    yield opened
    opened.close()


def test_compare_counts_and_fires_by_the_operator(trial: Any) -> None:
    """compare() returns whether value <op> threshold holds and counts tensors and steps."""
    ev = Evidence("R", trial)
    assert ev.compare(0, "w", quantity="q", value=5, parameter="p", threshold=3, fires_when=">")
    assert not ev.compare(1, "w", quantity="q", value=3, parameter="p", threshold=3, fires_when=">")
    assert ev.compare(1, "w", quantity="q", value=3, parameter="p", threshold=3, fires_when=">=")
    assert not ev.compare(
        1, "v", quantity="q", value=math.nan, parameter="p", threshold=3, fires_when="<"
    )
    summary = ev.summary()
    assert (
        summary["tensors_checked"],
        summary["steps_checked"],
        summary["comparisons"],
        summary["firings"],
    ) == (2, 2, 4, 2)


def test_firing_reason_names_mode_step_worker_and_sentence(trial: Any) -> None:
    """A firing records the global step, the mode and mode step, the worker and a sentence."""
    ev = Evidence("R", trial)
    ev.compare(
        2, "w", quantity="mean", value=0.5, parameter="threshold", threshold=1, fires_when="<"
    )
    (reason,) = ev.summary()["reasons"]
    assert reason["step"] == 2 and reason["mode"] == "EVAL" and reason["mode_step"] == 0
    assert reason["worker"] == "worker_0" and reason["tensors"] == ["w"]
    assert reason["value"] == 0.5 and reason["threshold"] == 1.0
    assert reason["comparison"] == "<" and reason["parameter"] == "threshold"
    assert "mean of w is 0.5 at EVAL step 0 (global step 2)" in reason["sentence"]
    assert ev.firings_at(2)[0].sentence == reason["sentence"]


def test_closest_keeps_the_smallest_margin_per_parameter(trial: Any) -> None:
    """closest holds, per parameter and comparison, the check nearest to firing."""
    ev = Evidence("R", trial)
    for step, value in enumerate([10.0, 4.0, 7.0]):
        ev.compare(
            step, "w", quantity="q", value=value, parameter="high", threshold=3, fires_when=">"
        )
        ev.compare(
            step, "w", quantity="q", value=value, parameter="low", threshold=1, fires_when="<"
        )
    closest = {c["parameter"]: c for c in ev.summary()["closest"]}
    assert closest["high"]["value"] == 10.0 and closest["high"]["step"] == 0
    assert closest["low"]["value"] == 4.0 and closest["low"]["step"] == 1


def test_non_finite_numbers_are_json_strings() -> None:
    """NaN and infinities become strings, so the result file stays valid JSON."""
    assert [json_number(v) for v in (1.5, math.nan, math.inf, -math.inf, None)] == [
        1.5,
        "NaN",
        "Infinity",
        "-Infinity",
        None,
    ]
    check = Check(0, ("w",), "q", math.inf, "p", 1.0, ">")
    json.loads(json.dumps(check.to_dict(), allow_nan=False))


def test_unknown_operator_is_refused(trial: Any) -> None:
    """fires_when must be one of >, >=, <, <=."""
    with pytest.raises(ValueError, match="fires_when"):
        Evidence("R", trial).compare(
            0, "w", quantity="q", value=1, parameter="p", threshold=1, fires_when="=="
        )


class _Reader(Rule):
    def invoke_at_step(self, step: int) -> bool:
        self.base_trial.tensor("w").value(step)
        return False


class _Idle(Rule):
    def invoke_at_step(self, step: int) -> bool:
        return False


def test_values_a_rule_reads_are_counted(trial: Any) -> None:
    """Rule.invoke counts every tensor value the rule reads, for rules that record nothing."""
    reader, idle = _Reader(trial), _Idle(trial)
    invoke_rule(reader)
    invoke_rule(idle)
    assert reader.evidence.reads == 3 and reader.evidence.checked_anything()
    assert idle.evidence.reads == 0 and not idle.evidence.checked_anything()


def test_reads_outside_a_rule_are_not_counted(trial: Any) -> None:
    """Reading a value outside Rule.invoke reaches no rule's evidence."""
    rule = _Idle(trial)
    trial.tensor("w").value(0)
    assert rule.evidence.reads == 0


class _PlainSeries:
    """Series.add as first written (every point through _lower/_higher and an open bucket),
    the reference that its quicker form must match point for point."""

    def __init__(self) -> None:
        self.width, self.count, self._open_count = 1, 0, 0
        self.buckets: list[Any] = []
        self.open: Any = None

    def add(self, step: int, value: float) -> None:
        point = (step, value)
        self.count += 1
        low_high = self.open
        self.open = (
            (point, point)
            if low_high is None
            else (_lower(low_high[0], point), _higher(low_high[1], point))
        )
        self._open_count += 1
        if self._open_count >= self.width:
            self.buckets.append(self.open)
            self.open, self._open_count = None, 0
            if len(self.buckets) >= SERIES_BUCKETS:
                b = self.buckets
                self.buckets = [
                    (_lower(b[i][0], b[i + 1][0]), _higher(b[i][1], b[i + 1][1]))
                    for i in range(0, len(b) - 1, 2)
                ] + ([b[-1]] if len(b) % 2 else [])
                self.width *= 2


@pytest.mark.parametrize("length", [5, SERIES_BUCKETS, 3 * SERIES_BUCKETS + 7, 9000])
def test_series_buckets_equal_the_plain_algorithm(length: int) -> None:
    """Series keeps the buckets (lowest and highest point of each run, NaN losing to any
    number, ties keeping the earlier point) that the plain algorithm keeps."""
    rng = np.random.default_rng(length)
    values = rng.integers(-5, 6, length).astype(float)  # many ties
    values[rng.integers(0, length, max(1, length // 50))] = math.nan
    values[:3] = math.nan
    series, plain = Series(("w",), "q", "p", ">", 1.0), _PlainSeries()
    for step, value in enumerate(values.tolist()):
        series.add(step, value, 1.0, value > 1.0, 1.0 - value)
        plain.add(step, value)
    kept = [p for bucket in plain.buckets for p in bucket]
    kept += list(plain.open) if plain.open is not None else []
    got = [p for bucket in series._buckets for p in bucket]
    got += list(series._open) if series._open is not None else []
    assert repr(got) == repr(kept) and series.count == plain.count == length
    assert series.width == plain.width


def test_quantities_naming_their_step_stay_one_series_past_the_label_cache() -> None:
    """More distinct quantities than the label cache holds ("since step N" at every step)
    still make one series, its points all counted."""
    ev = Evidence("R", None)
    steps = _QUANTITY_CACHE + 500
    for step in range(steps):
        ev.compare(
            step,
            "w",
            quantity=f"ratio since step {step}",
            value=0.5,
            parameter="p",
            threshold=1.0,
            fires_when=">",
        )
    (series,) = ev.series()["series"]
    assert series["quantity"] == "ratio since step …" and series["count"] == steps
    assert len(ev._labels) <= _QUANTITY_CACHE


def test_chart_reads_charts_what_was_read_at_the_evaluated_step(tmp_path: Path) -> None:
    """A rule that watches its reads gets a series per tensor read at the evaluated step (a
    scalar as its value, an array as mean |value|, per mode); reads of other steps (a window,
    a mode step) are left out, and charting them counts as no read."""
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([])
    for step in range(3):
        scale = float(step + 1)
        tensors = {"loss": np.float32(scale), "w": np.array([-1.0, 3.0], np.float32) * scale}
        writer.write_step(step, tensors, mode=ModeKeys.TRAIN, mode_step=step)
    writer.end_training()
    trial = create_trial(str(tmp_path / "trial"))
    evidence = Evidence("Mine", trial)
    evidence.watch_reads()
    with observe_reads(evidence.note_read):
        for name, step in (("loss", 2), ("w", 2), ("loss", 1), ("loss", 2)):
            trial.tensor(name).value(step)
    evidence.chart_reads(2)
    charted = {
        (s["tensors"][0], s["quantity"], s["mode"]): s["points"]
        for s in evidence.series()["series"]
    }
    assert charted == {
        ("loss", "value", "TRAIN"): [[2, 3.0]],
        ("w", "mean |value|", "TRAIN"): [[2, 6.0]],
    }
    assert evidence.reads == 4
