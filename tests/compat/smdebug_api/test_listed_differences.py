"""The differences from smdebug that issue 29 listed, each pinned: the index token's spelling,
what the refresh context managers give back, ``_global_to_mode``, ``config_constants`` and the
missing-event-file retry limit."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from evaluator.config import TRIAL_ENVIRONMENT, trial_options_from_env
from evaluator.errors import ConfigurationError
from evaluator.formats.keys import event_key
from evaluator.modes import ModeKeys
from evaluator.trial import TrialOptions
from tests.compat.smdebug_api.trials import declare_workers, end_job, write_steps


def test_last_index_token_joins_a_relative_local_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial opened by a relative folder names its token under that same relative folder."""
    from smdebug.trials import create_trial

    monkeypatch.chdir(tmp_path)
    write_steps("runs/job-a", range(4))
    end_job("runs/job-a")
    trial = create_trial("runs/job-a")
    assert trial.last_index_token == os.path.join(
        "runs/job-a", "index", "000000000", "000000000003_worker_0.json"
    )


def test_last_index_token_has_one_slash_after_a_trailing_slash(tmp_path: Path) -> None:
    """``<folder>/`` and ``<folder>`` give the same token, with a single separator."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(2))
    with_slash = create_trial(f"{tmp_path}/").last_index_token
    without = create_trial(str(tmp_path)).last_index_token
    assert with_slash == without == f"{tmp_path}/index/000000000/000000000001_worker_0.json"


def test_last_index_token_is_none_before_any_step_is_complete(tmp_path: Path) -> None:
    """With two workers and only one having written step 0, nothing is complete: no token."""
    from smdebug.trials import create_trial

    declare_workers(tmp_path, 2)
    write_steps(tmp_path, [0], worker="worker_0", collections=False)
    trial = create_trial(str(tmp_path))
    assert trial.last_complete_step == -1
    assert trial.last_index_token is None


def test_last_index_token_on_s3_is_the_object_key(
    tmp_path: Path, upload_folder: object, s3_bucket: str
) -> None:
    """On S3 the token is the index file's key in the bucket: no scheme, no bucket."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(3))
    end_job(tmp_path)
    uri = upload_folder(tmp_path, "jobs/job-b")  # type: ignore[operator]
    assert uri.rstrip("/") == f"s3://{s3_bucket}/jobs/job-b"
    for path in (f"s3://{s3_bucket}/jobs/job-b", f"s3://{s3_bucket}/jobs/job-b/"):
        trial = create_trial(path)
        assert trial.last_index_token == "jobs/job-b/index/000000000/000000000002_worker_0.json"
        assert trial.bucket_name == s3_bucket
        assert trial.prefix_name == "jobs/job-b/"


def test_the_token_follows_the_last_complete_step_as_steps_arrive(tmp_path: Path) -> None:
    """New complete steps move the token forward on the next refresh."""
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(2))
    trial = create_trial(str(tmp_path))
    assert trial.last_index_token.endswith("000000000001_worker_0.json")
    write_steps(tmp_path, range(2, 5), collections=False)
    assert trial.steps() == [0, 1, 2, 3, 4]
    assert trial.last_index_token == f"{tmp_path}/index/000000000/000000000004_worker_0.json"


def test_no_refresh_gives_back_a_list_of_trials(tmp_path: Path) -> None:
    """``with no_refresh([tr]) as [same]`` unpacks: the manager yields what it was given."""
    from smdebug.analysis.utils import no_refresh
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(2))
    trial = create_trial(str(tmp_path))
    with no_refresh([trial]) as [same]:
        assert same is trial
        assert trial.dynamic_refresh is False
    assert trial.dynamic_refresh is True


def test_refresh_and_no_refresh_give_back_a_single_trial(tmp_path: Path) -> None:
    """Given one trial, both managers yield that trial itself."""
    from smdebug.analysis.utils import no_refresh, refresh
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(2))
    trial = create_trial(str(tmp_path))
    with no_refresh(trial) as inside:
        assert inside is trial
        with refresh(trial) as again:
            assert again is trial
            assert trial.dynamic_refresh is True
        assert trial.dynamic_refresh is False


def test_no_refresh_as_a_decorator_still_switches_refresh_off(tmp_path: Path) -> None:
    """Used as a decorator, the manager switches refreshing off for each call."""
    from smdebug.analysis.utils import no_refresh
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(2))
    trial = create_trial(str(tmp_path))

    @no_refresh(trial)
    def seen() -> bool:
        return bool(trial.dynamic_refresh)

    assert seen() is False
    assert seen() is False
    assert trial.dynamic_refresh is True


def test_global_to_mode_maps_each_step_to_its_mode_and_mode_step(tmp_path: Path) -> None:
    """``_global_to_mode[step]`` is ``(mode, mode step)``, as the model-pruning rule reads it."""
    from smdebug import modes
    from smdebug.trials import create_trial

    write_steps(tmp_path, range(3), mode=ModeKeys.TRAIN, mode_step_of={0: 0, 1: 1, 2: 2})
    write_steps(tmp_path, [3, 4], mode=ModeKeys.EVAL, mode_step_of={3: 0, 4: 1}, collections=False)
    trial = create_trial(str(tmp_path))
    assert trial._global_to_mode[1] == (modes.TRAIN, 1)
    assert trial._global_to_mode[4] == (modes.EVAL, 1)
    assert trial._global_to_mode[4][0] == modes.EVAL
    assert trial._mode_to_global == {modes.TRAIN: {0: 0, 1: 1, 2: 2}, modes.EVAL: {0: 3, 1: 4}}
    assert 7 not in trial._global_to_mode


def test_global_to_mode_is_kept_current_as_steps_arrive(tmp_path: Path) -> None:
    """A dict taken before new steps arrive shows them once the trial has refreshed."""
    from smdebug import modes
    from smdebug.trials import create_trial

    write_steps(tmp_path, [0], mode=ModeKeys.TRAIN, mode_step_of={0: 0})
    trial = create_trial(str(tmp_path))
    table = trial._global_to_mode
    assert sorted(table) == [0]
    write_steps(tmp_path, [1], mode=ModeKeys.EVAL, mode_step_of={1: 0}, collections=False)
    trial.steps()  # any call that refreshes
    assert table[1] == (modes.EVAL, 0)
    assert trial._global_to_mode is table


def test_config_constants_name_the_variables_the_evaluator_reads() -> None:
    """The trial-option keys of ``smdebug.core.config_constants`` are variables we honour."""
    from smdebug.core import config_constants as cc

    assert cc.INCOMPLETE_STEP_WAIT_WINDOW_KEY == "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
    assert TRIAL_ENVIRONMENT[cc.INCOMPLETE_STEP_WAIT_WINDOW_KEY] == "incomplete_step_window"
    assert TRIAL_ENVIRONMENT[cc.TRAINING_END_DELAY_REFRESH_KEY] == "training_end_delay"
    assert cc.MISSING_EVENT_FILE_RETRY_LIMIT_KEY == "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
    assert cc.INCOMPLETE_STEP_WAIT_WINDOW_DEFAULT == TrialOptions().incomplete_step_window
    assert cc.MISSING_EVENT_FILE_RETRY_LIMIT == 100
    assert cc.DEFAULT_COLLECTIONS_FILE_NAME == "worker_0_collections.json"


def test_the_window_variable_from_config_constants_reaches_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Setting the variable named by ``INCOMPLETE_STEP_WAIT_WINDOW_KEY`` changes the window."""
    from smdebug.core.config_constants import INCOMPLETE_STEP_WAIT_WINDOW_KEY
    from smdebug.trials import create_trial

    monkeypatch.setenv(INCOMPLETE_STEP_WAIT_WINDOW_KEY, "10")
    write_steps(tmp_path, range(2))
    assert create_trial(str(tmp_path))._incomplete_wait_for_step_window == 10


def test_the_retry_limit_sets_the_wait_for_a_missing_event_file() -> None:
    """smdebug looks for a missing event file N times 2 s apart: N=5 is a 10 s wait."""
    options = trial_options_from_env({"SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT": "5"})
    assert options.missing_event_file_timeout == 10.0
    assert trial_options_from_env({}).missing_event_file_timeout == 60.0


def test_our_own_timeout_variable_wins_over_the_retry_limit() -> None:
    """EVALUATOR_MISSING_EVENT_FILE_TIMEOUT, when set too, is the one used."""
    env = {
        "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT": "5",
        "EVALUATOR_MISSING_EVENT_FILE_TIMEOUT": "3",
    }
    assert trial_options_from_env(env).missing_event_file_timeout == 3.0
    assert trial_options_from_env(env, missing_event_file_timeout=1).missing_event_file_timeout == 1


@pytest.mark.parametrize("bad", ["-1", "ten", "2.5", "١٢"])
def test_a_bad_retry_limit_is_a_configuration_error_naming_the_variable(bad: str) -> None:
    """Anything but a whole number >= 0 is refused with the variable's name in the message."""
    with pytest.raises(ConfigurationError, match="SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"):
        trial_options_from_env({"SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT": bad})


def test_smdebug_create_trial_honours_the_retry_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the limit at 0, a missing event file of a running job is given up at once."""
    from smdebug.core.config_constants import MISSING_EVENT_FILE_RETRY_LIMIT_KEY
    from smdebug.exceptions import TensorUnavailableForStep
    from smdebug.trials import create_trial

    monkeypatch.setenv(MISSING_EVENT_FILE_RETRY_LIMIT_KEY, "0")
    write_steps(tmp_path, range(3))
    (tmp_path / event_key(1, "worker_0")).unlink()
    trial = create_trial(str(tmp_path))
    assert trial.options.missing_event_file_timeout == 0
    assert trial.loaded_all_steps is False
    np.testing.assert_array_equal(trial.tensor("foo_0").value(0), np.zeros((3, 3), np.float32))
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("foo_0").value(1)
