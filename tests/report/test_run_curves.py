"""The run behind the curves (``evaluator.report.run_curves``): read from the trial when the
report is written, every mode, downsampled keeping extremes, firings and values not finite;
and the page's words: chart titles without "…", figures as a labelled table, advice only
about what is drawn, bars from a zero line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluator.report import DATA_FILE_NAME, data
from evaluator.report.advice import CURVES, VALIDATION, advice_for
from evaluator.report.data import carried_over, collect
from evaluator.report.html_charts import bar_chart, bars
from evaluator.report.run_curves import RUN_BUCKETS, downsample, run_curves
from evaluator.report.section_charts import chart_family, window_free
from evaluator.report.sections import figures_table
from evaluator.testing.tb_writer import write_scalars
from evaluator.trial import create_trial
from tests.report.harness import evaluate_with_report

LOSS_SERIES = [{"tensors": ["loss"], "quantity": "loss", "parameter": None, "mode": "TRAIN"}]


def test_a_short_series_is_kept_whole() -> None:
    steps = np.arange(50)
    points = downsample(steps, np.linspace(2.0, 1.0, 50), set())
    assert [p[0] for p in points] == list(range(50))


def test_a_long_series_keeps_extremes_firings_and_values_not_finite() -> None:
    """10,000 values: at most 2 per run of steps plus the marks; the spike, the dip, the NaN,
    the firing step and both ends survive."""
    n = 10_000
    steps = np.arange(n) * 3
    values = np.full(n, 1.0)
    values[4321], values[777], values[9000] = 50.0, -3.0, math.nan
    points = downsample(steps, values, {3 * 5555})
    kept = {p[0]: p[1] for p in points}
    assert len(points) <= 2 * RUN_BUCKETS + 4
    assert kept[3 * 4321] == 50.0 and kept[3 * 777] == -3.0 and kept[3 * 9000] == "NaN"
    assert 3 * 5555 in kept and 0 in kept and 3 * (n - 1) in kept


def test_run_curves_read_every_mode_of_a_tensorboard_run(tmp_path: Path) -> None:
    """A run with phase words: the training and validation loss, whole, at the logged steps."""
    write_scalars(
        tmp_path / "run",
        {
            "train/loss": [(s, 2.0 - s / 100) for s in range(100)],
            "val/loss": [(s, 2.1 - s / 100) for s in range(0, 100, 10)],
        },
    )
    trial = create_trial(str(tmp_path / "run"))
    found = {s["mode"]: s for s in run_curves(trial, LOSS_SERIES)}
    assert set(found) == {"TRAIN", "EVAL"}
    assert found["TRAIN"]["count"] == 100 and len(found["TRAIN"]["points"]) == 100
    assert found["EVAL"]["count"] == 10
    # at the steps the writer logged (docs/compatibility.md), not the global steps 2s / 2s + 1
    assert [p[0] for p in found["TRAIN"]["points"]] == list(range(100))
    assert [p[0] for p in found["EVAL"]["points"]] == list(range(0, 100, 10))


def test_only_watched_losses_are_read() -> None:
    """A tested series, or a watched one that is not the tensor's own value, reads nothing."""
    tested = [{"tensors": ["loss"], "quantity": "loss", "parameter": "threshold"}]
    norm = [{"tensors": ["w"], "quantity": "L2 norm", "parameter": None}]
    assert run_curves(object(), tested + norm) == []
    assert run_curves(None, LOSS_SERIES) == []


def test_the_data_file_keeper_never_reads_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``collect(..., read_run=False)`` (the timer that keeps the data file current) keeps the
    run of the last report and never touches the trial."""
    rule = {"configuration_name": "R", "rule": "R", "status": "InProgress"}
    previous = {"rules": {"R": {"series": [], "run": [{"mode": "TRAIN", "points": [[0, 1.0]]}]}}}

    class Live:  # a rule's Evidence whose trial must not be read
        def series(self, limit: int) -> dict[str, object]:
            return {"series": LOSS_SERIES}

        @property
        def trial(self) -> object:
            raise AssertionError("the keeper read the trial")

    monkeypatch.setattr(data, "_live", lambda e: e)
    out = collect({"rules": [rule]}, previous, {"R": Live()}, read_run=False)
    assert out["rules"]["R"]["run"] == previous["rules"]["R"]["run"]


def test_what_the_keeper_carries_over_gives_the_same_data_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keeper holds ``carried_over`` of what it wrote, not the file: a live rule's entry
    without its series (drawn again from its evidence), a rule with no evidence whole; the
    next turn's data file is the one the whole previous file gives."""
    rules = [
        {"configuration_name": "Live", "rule": "Live", "status": "InProgress", "fired_steps": [3]},
        {"configuration_name": "Old", "rule": "Old", "status": "NoIssuesFound"},
    ]
    run = [{"mode": "TRAIN", "points": [[0, 1.0]]}]
    previous = {
        "version": 1,
        "rules": {
            "Live": {"series": LOSS_SERIES, "run": run, "histogram": {"bins": [1]}},
            "Old": {"series": LOSS_SERIES, "run": run, "points_left_out": 2},
        },
    }

    class Live:
        trial = None

        def series(self, limit: int) -> dict[str, object]:
            return {"series": LOSS_SERIES, "points_left_out": 0}

    monkeypatch.setattr(data, "_live", lambda e: e)
    evidence = {"Live": Live()}
    carried = carried_over(previous, evidence)
    assert carried["rules"]["Live"] == {"run": run, "histogram": {"bins": [1]}}
    assert carried["rules"]["Old"] == previous["rules"]["Old"]
    result = {"rules": rules}
    want = collect(result, previous, evidence, read_run=False)
    assert collect(result, carried, evidence, read_run=False) == want


def test_the_data_file_holds_the_run(tmp_path: Path) -> None:
    """A run's data file holds the whole run beside the series the rule recorded."""
    write_scalars(tmp_path / "run", {"train/loss": [(s, 2.0) for s in range(60)]})
    run = evaluate_with_report(
        ["--trial-dir", str(tmp_path / "run"), "--rule", "LossNotDecreasing"], tmp_path / "out"
    )
    entry = json.loads((run.output_dir / DATA_FILE_NAME).read_text())["rules"]
    (rule,) = entry.values()
    (whole,) = rule["run"]
    assert whole["count"] == 60 and len(whole["points"]) == 60
    loss = [s for s in rule["series"] if s["quantity"] == "loss"]
    assert loss and len(loss[0]["points"]) < 60  # the rule read less than the run holds


def test_chart_titles_name_no_moving_window() -> None:
    label = "decrease (%) of the loss from the value at TRAIN step … to the mean over TRAIN steps …"
    assert chart_family(label) == "decrease (%) of the loss"
    assert window_free(label) == "decrease (%) of the loss from the value to the mean"
    rise = "rise (%) of the mean over TRAIN steps … of the loss above its lowest TRAIN value"
    assert window_free(rise) == "rise (%) of the mean of the loss above its lowest TRAIN value"
    assert chart_family("dead units (%)") == "dead units (%)"


def test_figures_are_a_labelled_table_with_validation_beside_training() -> None:
    html = figures_table({"fall_percent": 0.5, "validation_fall_percent": 0.25, "gap_percent": 3})
    assert "<th>training</th><th>validation</th>" in html
    assert "<td>Fall (%)</td>" in html and "0.25" in html and "Gap (%)" in html
    assert "validation_fall" not in html and ":" not in html
    overfit = figures_table({"level": 1.059, "training_level": 0.9444})  # Overfit's names
    assert '<td>Level</td><td class="num">0.9444</td><td class="num">1.059</td>' in overfit


def test_advice_refers_only_to_what_is_drawn() -> None:
    assert not any("validation curve" in s for s in advice_for("LossNotDecreasing", frozenset()))
    shown = frozenset({CURVES, VALIDATION})
    assert any("validation curve" in s for s in advice_for("LossNotDecreasing", shown))
    assert "curves below" not in advice_for("MyRule", frozenset())[1]
    assert "curves below" in advice_for("MyRule", frozenset({CURVES}))[1]


def test_a_negative_bar_starts_at_zero() -> None:
    """A value below 0 is drawn to the left of the zero line, never as its absolute value."""
    html = bars([("loss", -0.5)], threshold=0.5, parameter="diff_percent")
    assert 'class="zero" style="left:50.0%"' in html
    assert "margin-left:0.0%;width:50.0%" in html
    assert "bars start at 0" in html
    assert 'class="zero"' not in bar_chart([("a", 1.0), ("b", 2.0)], title="t")


def test_the_report_of_a_10000_step_run_stays_small(tmp_path: Path) -> None:
    """10,000 training and 1,000 validation values: each line drawn from at most about
    2 x RUN_BUCKETS points, the firing step among them, the page under 300 KB (114 KB
    measured, 53 KB of it the chart script)."""
    steps = 10_000
    write_scalars(
        tmp_path / "run",
        {
            "train/loss": [(s, 2.3 + 0.001 * math.sin(s)) for s in range(steps)],
            "val/loss": [(s, 2.31) for s in range(0, steps, 10)],
        },
    )
    run = evaluate_with_report(
        ["--trial-dir", str(tmp_path / "run"), "--rule", "LossNotDecreasing"], tmp_path / "out"
    )
    (rule,) = json.loads((run.output_dir / DATA_FILE_NAME).read_text())["rules"].values()
    whole = {s["mode"]: s for s in rule["run"]}
    assert whole["TRAIN"]["count"] == steps and whole["EVAL"]["count"] == steps // 10
    assert len(whole["TRAIN"]["points"]) <= 2 * RUN_BUCKETS + 3
    (fired,) = json.loads((run.output_dir / "rule_evaluation_result.json").read_text())["rules"]
    assert fired["fired_steps"][0] in {p[0] for p in whole["TRAIN"]["points"]}
    assert (run.output_dir / "rule_report.html").stat().st_size < 300 * 1024
