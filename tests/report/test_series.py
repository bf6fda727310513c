"""Evidence series: what compare() and record() keep, bounded, with firings and the closest
approach exact, readable while the rule's thread writes."""

from __future__ import annotations

import math
import threading
from typing import Any

from evaluator.rules.evidence import MAX_SERIES, SERIES_BUCKETS, Evidence


class _Trial:
    """A stand-in trial without modes."""

    def mode_modestep(self, step: int) -> Any:
        raise LookupError(step)

    def workers(self) -> list[str]:
        return ["worker_0"]


def _compare(ev: Evidence, step: int, name: str, value: float, threshold: float = 1.0) -> bool:
    return ev.compare(
        step, name, quantity="q", value=value, parameter="p", threshold=threshold, fires_when="<"
    )


def test_compare_records_every_value_of_a_short_run() -> None:
    """Each comparison of a short run is a point of its tensor's series, with the threshold."""
    ev = Evidence("R", _Trial())
    for step in range(5):
        _compare(ev, step, "a", 10.0 - step)
    (series,) = ev.series()["series"]
    assert series["points"] == [[s, 10.0 - s] for s in range(5)]
    assert (series["tensors"], series["quantity"], series["parameter"]) == (["a"], "q", "p")
    assert series["threshold"] == 1.0 and series["comparison"] == "<" and series["count"] == 5


def test_long_series_is_bounded_and_keeps_spikes_firings_and_closest() -> None:
    """100k values keep at most 2 per bucket, yet the spike, firings and closest survive."""
    ev = Evidence("R", _Trial())
    for step in range(100_000):
        value = 50.0 if step == 77_777 else 0.5 if step in (1234, 99_001) else 5.0 + math.sin(step)
        _compare(ev, step, "a", value)
    (series,) = ev.series()["series"]
    points = dict(map(tuple, series["points"]))
    assert len(points) <= 2 * SERIES_BUCKETS + 2
    assert points[77_777] == 50.0  # the spike: a bucket's highest
    assert points[1234] == 0.5 and points[99_001] == 0.5
    assert series["firings"] == [[1234, 0.5], [99_001, 0.5]] and series["firing_count"] == 2
    assert series["closest"] == [1234, 0.5]


def test_limit_cuts_points_but_never_marks() -> None:
    """series(limit=n) keeps about n points per series plus every firing point."""
    ev = Evidence("R", _Trial())
    for step in range(3000):
        _compare(ev, step, "a", 0.5 if step == 2999 else 2.0 + step % 7)
    (series,) = ev.series(limit=100)["series"]
    assert len(series["points"]) <= 102
    assert [2999, 0.5] in series["points"]


def test_window_steps_in_a_quantity_make_one_series() -> None:
    """A quantity naming a moving window ("steps 3..9") is one series, labelled without it."""
    ev = Evidence("R", _Trial())
    for step in range(10, 13):
        ev.compare(
            step,
            "loss",
            quantity=f"decrease over TRAIN steps {step - 5}..{step}",
            value=1.0,
            parameter="diff",
            threshold=0.0,
            fires_when="<",
        )
    (series,) = ev.series()["series"]
    assert series["quantity"] == "decrease over TRAIN steps …" and series["count"] == 3


def test_record_adds_a_series_without_threshold_or_check() -> None:
    """record() (the custom-rule API) keeps a plain series and counts no comparison."""
    ev = Evidence("R", _Trial())
    ev.record(3, "w", quantity="mean |w|", value=0.25)
    (series,) = ev.series()["series"]
    assert series["points"] == [[3, 0.25]] and series["threshold"] is None
    assert series["parameter"] is None and ev.comparisons == 0


def test_series_beyond_the_cap_are_counted_not_kept() -> None:
    """More than MAX_SERIES tensors: the extra ones are counted as left out."""
    ev = Evidence("R", _Trial())
    for k in range(MAX_SERIES + 3):
        _compare(ev, 0, f"t{k}", 5.0)
    data = ev.series()
    assert len(data["series"]) == MAX_SERIES and data["points_left_out"] == 3


def test_non_finite_values_are_json_strings() -> None:
    """NaN and infinities are written as the strings JSON readers expect."""
    ev = Evidence("R", _Trial())
    _compare(ev, 0, "a", math.inf)
    _compare(ev, 1, "a", math.nan)
    (series,) = ev.series()["series"]
    assert [p[1] for p in series["points"]] == ["Infinity", "NaN"]


def test_summary_counts_the_series_and_holds_no_points() -> None:
    """The result file's evidence counts the series; their points stay out of it."""
    ev = Evidence("R", _Trial())
    _compare(ev, 0, "a", 5.0)
    summary = ev.summary()
    assert summary["series"] == 1 and "points" not in str(summary)


def test_series_is_read_safely_while_a_thread_writes() -> None:
    """Reading the series while another thread compares never fails and stays ordered."""
    ev = Evidence("R", _Trial())
    done = threading.Event()

    def write() -> None:
        for step in range(60_000):
            _compare(ev, step, f"t{step % 3}", 2.0 + step % 5)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    while not done.is_set():
        for series in ev.series(limit=200)["series"]:
            steps = [p[0] for p in series["points"]]
            assert steps == sorted(steps)
    thread.join()
