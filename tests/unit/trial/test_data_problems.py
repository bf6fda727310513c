"""Event files that cannot give their records: the step is skipped, the file is reported once
(WARNING, counted, listed), and a complete trial never waits for a file that cannot come."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import structlog

from evaluator.engine.problems import DataProblems
from evaluator.errors import TensorUnavailableForStep
from evaluator.formats import Collection
from evaluator.formats.keys import event_key
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from evaluator.trial.tensor import Tensor


def tensor(e: Any, name: str) -> Tensor:
    """A Tensor over the engine's view; its trial is a stand-in with a name and nothing else."""
    return Tensor(name, SimpleNamespace(name="job"), view=e.view)  # type: ignore[arg-type]


def damaged_trial(e: Any) -> None:
    """Steps 0-3 written; step 1's event file missing, step 2's empty, step 3's cut short."""
    e.write(0, 1, 2, 3, sync=False)
    keys = {s: event_key(s, "worker_0") for s in (1, 2, 3)}
    e.sync(skip=lambda k: k in keys.values())
    e.storage.put(keys[2], b"")
    e.storage.put(keys[3], e.event_bytes(3)[:-7])  # the last record torn
    e.synced.update(keys.values())  # later syncs leave them so


def test_a_finished_trial_reports_missing_empty_and_torn_event_files(engine: Any) -> None:
    """On an ended trial every unreadable event file is skipped, logged at WARNING once and
    listed with its step and problem; records before a tear still read."""
    e = engine(prefetch_steps=0, missing_event_file_timeout=3600, poll_interval=0.01)
    damaged_trial(e)
    e.end()
    e.poll()
    with structlog.testing.capture_logs() as logs:
        for step in (1, 2, 3):
            with pytest.raises(TensorUnavailableForStep):
                tensor(e, "c").value(step)
            with pytest.raises(TensorUnavailableForStep):
                tensor(e, "c").value(step)  # the same file again: not reported twice
        np.testing.assert_array_equal(tensor(e, "a").value(3), e.value_of("a", 3))
    problems = e.cache.problems.listed()
    assert [(p["step"], p["problem"], p["tensor"]) for p in problems] == [
        (1, "missing", "c"),
        (2, "empty", "c"),
        (3, "truncated", "c"),
    ]
    assert all(p["trial_complete"] and p["file"].endswith(".tfevents") for p in problems)
    assert e.cache.problems.count == 3
    warned = [entry for entry in logs if entry["event"] == "data_problem"]
    assert [w["log_level"] for w in warned] == ["warning"] * 3
    assert warned[0]["file"] == "memory://job/" + event_key(1, "worker_0")


def test_a_trial_completed_by_idle_scans_does_not_wait_for_missing_files(engine: Any) -> None:
    """A trial without end marker that idle scans completed reads a missing event file once
    instead of waiting missing_event_file_timeout for it."""
    e = engine(
        prefetch_steps=0,
        missing_event_file_timeout=3600,
        poll_interval=0.01,
        idle_scans_to_complete=1,
    )
    damaged_trial(e)
    while not e.state.loaded_all_steps:
        e.poll()
    e.storage.calls.clear()
    for step in (1, 2):
        with pytest.raises(TensorUnavailableForStep):
            tensor(e, "b").value(step)
    assert e.storage.calls["read_range"] <= 4  # one read, one probe for the reason, per file
    assert e.cache.problems.count == 2


def test_the_wait_for_a_missing_file_ends_when_the_trial_completes(engine: Any) -> None:
    """A read waiting for a missing event file of a running trial gives up as soon as a scan
    sees the end marker, and the file is reported."""
    e = engine(prefetch_steps=0, missing_event_file_timeout=3600, poll_interval=0.01)
    damaged_trial(e)
    e.poll()
    ender = threading.Timer(0.05, lambda: (e.end(), e.poll()))
    ender.start()
    try:
        with pytest.raises(TensorUnavailableForStep):
            tensor(e, "a").value(1)
    finally:
        ender.join()
    assert [p["problem"] for p in e.cache.problems.listed()] == ["missing"]


def test_the_problem_list_is_bounded_and_the_count_is_not() -> None:
    """Past ``keep`` problems the list stops growing; the count goes on."""
    problems = DataProblems(keep=2)
    for step in range(5):
        problems.note(
            file=f"f{step}",
            step=step,
            worker="w",
            problem="missing",
            tensor="t",
            mode="TRAIN",
            detail="",
            trial_complete=True,
        )
    assert [p["step"] for p in problems.listed()] == [0, 1]
    assert problems.count == 5


def test_the_trial_exposes_its_data_problems(tmp_path: Path) -> None:
    """``Trial.data_problems`` lists the unreadable files and ``data_problem_count`` counts
    them; the lists handed out are copies."""
    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("all", include_regex=[".*"])])
    for step in range(3):
        writer.write_step(step, {"x": np.float32(step)}, mode=ModeKeys.TRAIN)
    writer.end_training()
    (tmp_path / event_key(1, "worker_0")).unlink()
    trial = create_trial(str(tmp_path))
    assert trial.data_problems == [] and trial.data_problem_count == 0
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("x").value(1)
    (problem,) = trial.data_problems
    assert (problem["step"], problem["problem"], problem["mode"]) == (1, "missing", "GLOBAL")
    assert problem["file"] == f"{tmp_path}/{event_key(1, 'worker_0')}"
    trial.data_problems.clear()
    assert trial.data_problem_count == 1 and len(trial.data_problems) == 1


def test_a_complete_trial_does_not_read_a_damaged_file_again(engine: Any) -> None:
    """Once a complete trial's event file is known missing, the other tensors of that step
    fail without another read; intact records of a torn file still read."""
    e = engine(prefetch_steps=0, missing_event_file_timeout=3600, poll_interval=0.01)
    damaged_trial(e)
    e.end()
    e.poll()
    for step in (1, 3):
        with pytest.raises(TensorUnavailableForStep):
            tensor(e, "c").value(step)
    e.storage.calls.clear()
    for name in ("a", "b"):
        with pytest.raises(TensorUnavailableForStep):
            tensor(e, name).value(1)
    assert e.storage.calls["read_range"] == 0
    np.testing.assert_array_equal(tensor(e, "a").value(3), e.value_of("a", 3))
    assert e.cache.problems.count == 2
