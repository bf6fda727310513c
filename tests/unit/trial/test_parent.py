"""A folder that holds smdebug trials, given as a trial, is named with its trials (issue 26,
friction 6); a trial folder, an empty folder and S3 URIs pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.errors import ConfigurationError
from evaluator.sources.smdebug.parent import check_not_a_parent, smdebug_trials_below


def _trial(folder: Path, mark: str = "index") -> Path:
    (folder / mark).mkdir(parents=True)
    return folder


def test_sub_folders_that_are_trials_are_listed(tmp_path: Path) -> None:
    """Trials one level down, and a job folder's debug-output two levels down, are found."""
    _trial(tmp_path / "b")
    _trial(tmp_path / "a", "collections")
    _trial(tmp_path / "job" / "debug-output")
    (tmp_path / "notes").mkdir()
    assert smdebug_trials_below(str(tmp_path)) == ["a", "b", "job/debug-output"]


def test_a_trial_with_sub_folders_is_a_trial(tmp_path: Path) -> None:
    """A folder that is itself a trial is never taken for a parent."""
    _trial(tmp_path)
    _trial(tmp_path / "events" / "nested")
    assert smdebug_trials_below(str(tmp_path)) == []
    check_not_a_parent(str(tmp_path), "base_trial")


def test_the_error_names_trials_and_how_to_pass_one(tmp_path: Path) -> None:
    """The message lists the trials and gives the flag with the first one."""
    for name in ("run-1", "run-2"):
        _trial(tmp_path / name)
    with pytest.raises(ConfigurationError) as error:
        check_not_a_parent(str(tmp_path), "base_trial")
    text = str(error.value)
    assert "holds trials" in text and "run-1, run-2" in text
    assert f"--trial-dir {tmp_path / 'run-1'}" in text


def test_empty_folders_and_s3_pass(tmp_path: Path) -> None:
    """An empty folder (a trial still to come) and an S3 URI are left to the trial."""
    check_not_a_parent(str(tmp_path), "base_trial")
    check_not_a_parent("s3://bucket/prefix", "base_trial")
