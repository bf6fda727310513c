"""``has_passed_step``, ``steps``, ``last_complete_step``, ``last_index_token`` and
``wait_for_steps`` over writer layouts: one or three workers, every step or gaps, a finished or
a running job. The trials are bare index files, as the step bookkeeping needs nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.modes import ModeKeys, StepState
from tests.compat.smdebug_api.trials import bare_index, declare_workers, end_job

AVAILABLE, UNAVAILABLE, NOT_YET = (
    StepState.AVAILABLE,
    StepState.UNAVAILABLE,
    StepState.NOT_YET_AVAILABLE,
)
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def layout(root: Path, writers: dict[int, str], *, workers: int, ended: bool) -> str:
    """Index files for ``{step: "abc"}`` (the workers, by letter, that wrote each step)."""
    declare_workers(root, workers)
    for step, letters in writers.items():
        for letter in letters:
            bare_index(root, step, f"worker_{'abc'.index(letter)}", mode_step=step)
    if ended:
        end_job(root)
    return str(root)


def token(root: Path, step: int, worker: str) -> str:
    return f"{root}/index/000000000/{step:012d}_{worker}.json"


@pytest.mark.parametrize("ended", [True, False])
def test_one_writer_every_step(tmp_path: Path, ended: bool) -> None:
    """One worker wrote 0..6: all complete, a later step is unavailable only once ended."""
    from smdebug.trials import create_trial

    trial = create_trial(layout(tmp_path, dict.fromkeys(range(7), "a"), workers=1, ended=ended))
    assert len(trial.workers()) == 1
    assert trial.loaded_all_steps is ended
    assert trial.steps(show_incomplete_steps=True) == trial.steps() == list(range(7))
    assert trial.has_passed_step(3) == AVAILABLE
    assert trial.has_passed_step(8) == (UNAVAILABLE if ended else NOT_YET)
    assert trial.last_complete_step == 6
    assert trial.last_index_token == token(tmp_path, 6, "worker_0")


@pytest.mark.parametrize("ended", [True, False])
def test_one_writer_two_modes(tmp_path: Path, ended: bool) -> None:
    """TRAIN at 0..30 then EVAL at 40..70 (mode steps 0..30): mode steps answer per mode."""
    from smdebug.trials import create_trial

    declare_workers(tmp_path, 1)
    for i in range(0, 31, 10):
        bare_index(tmp_path, i, "worker_0", "TRAIN", i)
        bare_index(tmp_path, i + 40, "worker_0", "EVAL", i)
    if ended:
        end_job(tmp_path)
    trial = create_trial(str(tmp_path))
    after = UNAVAILABLE if ended else NOT_YET
    assert trial.steps(show_incomplete_steps=True) == trial.steps() == list(range(0, 71, 10))
    assert trial.has_passed_step(30) == AVAILABLE
    assert trial.has_passed_step(23, mode=TRAIN) == UNAVAILABLE
    assert trial.has_passed_step(40, mode=TRAIN) == after
    assert trial.has_passed_step(30, mode=EVAL) == AVAILABLE
    assert trial.has_passed_step(23, mode=EVAL) == UNAVAILABLE
    for mode in (ModeKeys.GLOBAL, TRAIN, EVAL):
        assert trial.has_passed_step(80, mode=mode) == after
    assert trial.last_index_token == token(tmp_path, 70, "worker_0")
    assert trial.last_complete_step == 70


@pytest.mark.parametrize("ended", [True, False])
def test_one_writer_skipped_a_step(tmp_path: Path, ended: bool) -> None:
    """Step 4 never written by the only worker: unavailable, since 5 is complete."""
    from smdebug.exceptions import NoMoreData, StepUnavailable
    from smdebug.trials import create_trial

    steps = dict.fromkeys([0, 1, 2, 3, 5, 6], "a")
    trial = create_trial(layout(tmp_path, steps, workers=1, ended=ended))
    assert trial.steps(show_incomplete_steps=True) == trial.steps() == [0, 1, 2, 3, 5, 6]
    assert trial.has_passed_step(4) == UNAVAILABLE
    assert trial.last_complete_step == 6
    trial.wait_for_steps([0, 1, 2, 3, 5, 6])
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([0, 4])
    if ended:
        with pytest.raises(NoMoreData):
            trial.wait_for_steps([6, 7])


@pytest.mark.parametrize("ended", [True, False])
def test_three_writers_every_step(tmp_path: Path, ended: bool) -> None:
    """Three workers wrote every step: the token names the last worker in name order."""
    from smdebug.trials import create_trial

    trial = create_trial(layout(tmp_path, dict.fromkeys(range(7), "abc"), workers=3, ended=ended))
    assert len(trial.workers()) == 3
    assert trial.steps() == list(range(7))
    assert trial.has_passed_step(6) == AVAILABLE
    assert trial.has_passed_step(7) == (UNAVAILABLE if ended else NOT_YET)
    assert trial.last_index_token == token(tmp_path, 6, "worker_2")


def test_three_writers_last_step_partial_on_a_running_job(tmp_path: Path) -> None:
    """Step 6 written by two of three workers, job running: not yet available, not counted."""
    from smdebug.trials import create_trial

    writers = {**dict.fromkeys(range(6), "abc"), 6: "ac"}
    trial = create_trial(layout(tmp_path, writers, workers=3, ended=False))
    assert trial.steps(show_incomplete_steps=True) == list(range(7))
    assert trial.steps() == list(range(6))
    assert trial.has_passed_step(5) == AVAILABLE
    assert trial.has_passed_step(6) == NOT_YET
    assert trial.last_complete_step == 5
    assert trial.last_index_token == token(tmp_path, 5, "worker_2")


def test_three_writers_last_step_partial_on_a_finished_job(tmp_path: Path) -> None:
    """The same partial step on a finished job counts as complete: nothing more will come."""
    from smdebug.trials import create_trial

    writers = {**dict.fromkeys(range(6), "abc"), 6: "ac"}
    trial = create_trial(layout(tmp_path, writers, workers=3, ended=True))
    assert trial.loaded_all_steps is True
    assert trial.steps() == list(range(7))
    assert trial.has_passed_step(6) == AVAILABLE
    assert trial.last_complete_step == 6


def test_partial_steps_before_a_complete_one_count_as_complete(tmp_path: Path) -> None:
    """Steps 3..5 lack worker b but 6 has all three: 3..5 will never complete, so they count."""
    from smdebug.trials import create_trial

    writers = {**dict.fromkeys(range(3), "abc"), 3: "ac", 4: "ac", 5: "ac", 6: "abc"}
    trial = create_trial(layout(tmp_path, writers, workers=3, ended=False))
    assert trial.steps() == trial.steps(show_incomplete_steps=True) == list(range(7))
    assert [trial.has_passed_step(s) for s in (2, 4, 6, 8)] == [
        AVAILABLE,
        AVAILABLE,
        AVAILABLE,
        NOT_YET,
    ]
    assert trial.last_index_token == token(tmp_path, 6, "worker_2")


def test_a_missing_step_before_partial_ones_waits(tmp_path: Path) -> None:
    """Step 3 absent, 4..6 lack worker b, job running: all of them may still come."""
    from smdebug.trials import create_trial

    writers = {**dict.fromkeys(range(3), "abc"), 4: "ac", 5: "ac", 6: "ac"}
    trial = create_trial(layout(tmp_path, writers, workers=3, ended=False))
    assert trial.steps(show_incomplete_steps=True) == [0, 1, 2, 4, 5, 6]
    assert trial.steps() == [0, 1, 2]
    assert [trial.has_passed_step(s) for s in (2, 3, 4, 6, 8)] == [
        AVAILABLE,
        NOT_YET,
        NOT_YET,
        NOT_YET,
        NOT_YET,
    ]
    assert trial.last_complete_step == 2
    assert trial.last_index_token == token(tmp_path, 2, "worker_2")


def test_a_missing_step_before_a_complete_one_is_unavailable(tmp_path: Path) -> None:
    """Step 3 absent but 6 complete: 3 was skipped."""
    from smdebug.trials import create_trial

    writers = {**dict.fromkeys(range(3), "abc"), 4: "ac", 5: "ac", 6: "abc"}
    trial = create_trial(layout(tmp_path, writers, workers=3, ended=False))
    assert trial.has_passed_step(3) == UNAVAILABLE
    assert trial.has_passed_step(4) == AVAILABLE
    assert trial.last_complete_step == 6


def test_too_many_incomplete_steps_move_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Window 10, only one of three workers writing 0..19: half a window is declared complete
    when the trial opens (step 4), again at the next refresh (step 9), and then it stays."""
    from smdebug.core.config_constants import INCOMPLETE_STEP_WAIT_WINDOW_KEY
    from smdebug.trials import create_trial

    monkeypatch.setenv(INCOMPLETE_STEP_WAIT_WINDOW_KEY, "10")
    trial = create_trial(layout(tmp_path, dict.fromkeys(range(20), "a"), workers=3, ended=False))
    assert trial.last_complete_step == 4
    assert trial.last_index_token == token(tmp_path, 4, "worker_2")
    assert len(trial.workers()) == 3  # refreshes
    assert trial.last_complete_step == 9
    assert trial.last_index_token == token(tmp_path, 9, "worker_2")
    assert trial.steps(show_incomplete_steps=True) == list(range(20))
    for _ in range(3):
        trial.tensor_names()
        assert trial.last_complete_step == 9
        assert trial.last_index_token == token(tmp_path, 9, "worker_2")
    assert trial.loaded_all_steps is False
