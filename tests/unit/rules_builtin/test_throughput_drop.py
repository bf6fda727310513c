"""ThroughputDrop on Hugging Face-style logs: eval/samples_per_second falling below a fraction of
its running median for patience values in a row."""

from __future__ import annotations

from pathlib import Path

from tests.unit.rules_builtin.stability_logs import log, run


def test_a_lasting_drop_fires_on_its_third_low_value(tmp_path: Path) -> None:
    """100 samples/s falling to 30 from value 10 fires at value 12 (patience 3), naming the
    median before."""
    speed = [100.0 + (i % 3) for i in range(10)] + [30.0] * 10
    result = run(log(tmp_path, {"eval/samples_per_second": speed}), "ThroughputDrop")
    assert result.fired[0] == 130
    check = result.checks[0]
    assert (check.mode, check.parameter, check.value) == ("EVAL", "patience", 3.0)
    assert check.diagnosis is not None and check.diagnosis.kind == "slower"
    assert check.diagnosis.figures["since_mode_step"] == 110


def test_a_dip_of_half_or_a_short_one_is_quiet(tmp_path: Path) -> None:
    """0.5 x the median for 9 values (above fraction 0.4) and 0.2 x for 2 values (below
    patience 3) are quiet; fraction=0.6 fires on the first."""
    half = [100.0] * 10 + [50.0] * 9 + [100.0] * 5
    short = [100.0] * 10 + [20.0] * 2 + [100.0] * 5
    folder = log(tmp_path / "half", {"train/tokens_per_second": half})
    assert run(folder, "ThroughputDrop").fired == []
    assert run(folder, "ThroughputDrop", fraction="0.6").fired[0] == 130
    assert (
        run(log(tmp_path / "short", {"train/tokens_per_second": short}), "ThroughputDrop").fired
        == []
    )


def test_modes_are_separate_series(tmp_path: Path) -> None:
    """Training and evaluation speeds are not compared with each other."""
    series = {"train/samples_per_second": [500.0] * 10, "eval/samples_per_second": [50.0] * 10}
    result = run(log(tmp_path, series), "ThroughputDrop")
    assert result.fired == [] and not result.nothing


def test_no_throughput_checks_nothing(tmp_path: Path) -> None:
    """Without a logged throughput the rule checked nothing (the trial does not expose the
    events' wall time to stand in for one)."""
    assert run(log(tmp_path, {"train/loss": [1.0] * 10}), "ThroughputDrop").nothing
