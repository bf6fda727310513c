"""Opening trials (``create_trial``, ``LocalTrial``, ``S3Trial``, ``range_steps``), collection
files, modes, tensor names by step, mode, regex and collection, and the Tensor API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys, StepState
from evaluator.testing import TrialWriter
from tests.compat.smdebug_api.trials import declare_workers, end_job, write_steps

Upload = Callable[[Path, str], str]


def every_value_is_its_step(trial: object, steps: int, tensors: int) -> None:
    """Each of ``tensors`` tensors has ``steps`` steps and holds its step number there."""
    names = trial.tensor_names()  # type: ignore[attr-defined]
    assert len(names) == tensors
    for name in names:
        tensor = trial.tensor(name)  # type: ignore[attr-defined]
        assert len(tensor.steps()) == steps
        for s in tensor.steps():
            np.testing.assert_array_equal(tensor.value(s), np.full((3, 3), s, np.float32))


def test_range_steps_limits_a_local_trial(tmp_path: Path) -> None:
    """``range_steps=(0, 5)`` keeps steps 0..4 of 20."""
    from smdebug.trials import create_trial

    write_steps(tmp_path / "job", range(20))
    trial = create_trial(f"{tmp_path}/job", range_steps=(0, 5))
    assert trial.steps() == [0, 1, 2, 3, 4]


def test_local_trial_constructor(tmp_path: Path) -> None:
    """``LocalTrial(name=, dirname=)`` opens the folder with every step and value."""
    from smdebug.trials import LocalTrial

    write_steps(tmp_path, range(12), count=4)
    trial = LocalTrial(name="job", dirname=str(tmp_path))
    assert trial.name == "job"
    every_value_is_its_step(trial, steps=12, tensors=4)


def test_s3_trial_constructor_and_range(tmp_path: Path, upload_folder: Upload) -> None:
    """``S3Trial(name, bucket_name, prefix_name)`` and an S3 ``create_trial`` with a range."""
    from smdebug.core.utils import is_s3
    from smdebug.trials import S3Trial, create_trial

    write_steps(tmp_path, range(8), count=2)
    uri = upload_folder(tmp_path, "outputs/job-c")
    _, bucket, prefix = is_s3(uri)
    assert bucket is not None and prefix is not None
    every_value_is_its_step(
        S3Trial(name=prefix, bucket_name=bucket, prefix_name=prefix), steps=8, tensors=2
    )
    assert len(create_trial(uri, range_steps=(0, 5)).steps()) == 5


def test_several_s3_trials_side_by_side(tmp_path: Path, upload_folder: Upload) -> None:
    """Trials open at once on different prefixes keep their own data."""
    from smdebug.trials import create_trial

    uris = []
    for i in range(3):
        folder = tmp_path / str(i)
        write_steps(folder, range(i + 2), count=i + 1)
        uris.append(upload_folder(folder, f"outputs/multi-{i}"))
    trials = [create_trial(u) for u in uris]
    for i, trial in enumerate(trials):
        every_value_is_its_step(trial, steps=i + 2, tensors=i + 1)


def test_workers_come_from_every_collection_file(tmp_path: Path) -> None:
    """Thirty collection files, one per worker: thirty workers."""
    from smdebug.trials import create_trial

    declare_workers(tmp_path, 30)
    end_job(tmp_path)
    assert len(create_trial(str(tmp_path)).workers()) == 30


def test_missing_collection_files_of_a_finished_job(tmp_path: Path) -> None:
    """A job that ended with fewer collection files than workers raises MissingCollectionFiles."""
    from smdebug.exceptions import MissingCollectionFiles
    from smdebug.trials import create_trial

    for w in range(2):
        TrialWriter(tmp_path, worker=f"worker_{w}").write_collections([], num_workers=3)
    end_job(tmp_path)
    with pytest.raises(MissingCollectionFiles):
        create_trial(str(tmp_path))


def test_steps_of_two_modes_as_they_are_written(tmp_path: Path) -> None:
    """Steps written one by one, TRAIN at even and EVAL at odd global steps: each becomes
    available in its mode as it lands, and the next is not yet there."""
    from smdebug import modes
    from smdebug.trials import create_trial

    writer = TrialWriter(tmp_path, worker="host-1")
    writer.write_collections([Collection("default", tensor_names={"arr"})])
    trial = create_trial(str(tmp_path))
    for s in range(10):
        mode = modes.TRAIN if s % 2 == 0 else modes.EVAL
        writer.write_step(s, {"arr": np.arange(4, dtype=np.float32)}, mode=mode, mode_step=s // 2)
        assert trial.has_passed_step(s // 2, mode=mode) == StepState.AVAILABLE
        if mode == modes.TRAIN:
            assert trial.has_passed_step(s // 2, mode=modes.EVAL) == StepState.NOT_YET_AVAILABLE
        assert trial.has_passed_step(s) == StepState.AVAILABLE
        assert trial.has_passed_step(s + 1) == StepState.NOT_YET_AVAILABLE
        assert trial.has_passed_step(s + 1, mode=modes.TRAIN) == StepState.NOT_YET_AVAILABLE
    assert trial.tensor_names() == ["arr"]
    assert len(trial.steps()) == 10
    assert len(trial.steps(mode=modes.TRAIN)) == len(trial.steps(mode=modes.EVAL)) == 5
    assert len(trial.modes()) == 2
    for g in range(10):
        assert trial.mode(g) == (modes.TRAIN if g % 2 == 0 else modes.EVAL)
        assert trial.mode_step(g) == g // 2
    for m in range(5):
        assert trial.global_step(modes.TRAIN, m) == 2 * m
        assert trial.global_step(modes.EVAL, m) == 2 * m + 1
    arr = trial.tensor("arr")
    assert len(arr.steps()) == 10
    assert len(arr.steps(mode=modes.TRAIN)) == len(arr.steps(mode=modes.EVAL)) == 5
    for m in range(5):
        assert arr.value(m, mode=modes.TRAIN) is not None
        assert arr.value(m, mode=modes.EVAL) is not None


def test_tensor_names_by_step_and_mode(tmp_path: Path) -> None:
    """Names answer per global step, per mode step, and per mode."""
    from smdebug import modes
    from smdebug.trials import create_trial

    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("default")])
    for s in range(6):
        if s % 2 == 0:
            writer.write_step(s, {"a": np.ones(2)}, mode=modes.TRAIN, mode_step=s // 2)
        else:
            writer.write_step(s, {"b": np.ones(2)}, mode=modes.EVAL, mode_step=s // 2)
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names() == ["a", "b"]
    assert trial.tensor_names(step=0) == ["a"]
    assert trial.tensor_names(step=1) == ["b"]
    assert trial.tensor_names(step=0, mode=modes.TRAIN) == ["a"]
    assert trial.tensor_names(step=0, mode=modes.EVAL) == ["b"]
    assert trial.tensor_names(mode=modes.TRAIN) == ["a"]
    assert trial.tensor_names(mode=modes.EVAL) == ["b"]


def test_tensor_names_by_regex_and_by_collection(tmp_path: Path) -> None:
    """A collection grown in the session (a regex and names, one never saved) selects the
    saved names it covers; a regex and a collection together are a ValueError."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(3), prefix="foo", count=10)
    write_steps(tmp_path, range(3, 6), prefix="boo", count=10, collections=False)
    trial = create_trial(str(tmp_path))
    trial.collection("mine").include("foo")
    for name in ("boo_5", "boo_6", "boo_17"):
        trial.collection("mine").add_tensor_name(name)
    assert len(trial.tensor_names()) == 20
    assert len(trial.tensor_names(regex="foo")) == 10
    assert len(trial.tensor_names(collection="mine")) == 12
    assert len(trial.tensor_names(collection=trial.collection("mine"))) == 12
    with pytest.raises(ValueError):
        trial.tensor_names(collection=trial.collection("mine"), regex="a")


def test_the_tensor_api(tmp_path: Path) -> None:
    """value, values, shape, reduction_value (saved and computed), workers and prev_steps."""
    from smdebug.exceptions import StepUnavailable
    from smdebug.trials import create_trial

    write_steps(tmp_path, [0, 2, 4, 6], count=1)
    end_job(tmp_path)
    t = create_trial(str(tmp_path)).tensor("foo_0")
    assert t.steps() == [0, 2, 4, 6]
    assert t.shape(2) == (3, 3)
    assert sorted(t.values()) == [0, 2, 4, 6]
    assert float(t.reduction_value(4, "mean")) == 4.0
    assert float(t.reduction_value(4, "max", abs=True)) == 4.0
    assert t.workers(6) == ["worker_0"]
    assert t.prev_steps(6, 2) == [4, 6]  # the step itself included
    assert t.prev_steps(5) == [0, 2, 4]
    with pytest.raises(StepUnavailable):
        t.value(3)
    assert t.value(6, mode=ModeKeys.GLOBAL).dtype == np.float32
