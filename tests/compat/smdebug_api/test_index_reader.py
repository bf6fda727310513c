"""Values whose event file is missing though an index file names it: present files read, a
missing one is ``TensorUnavailableForStep`` once the job has ended, or once the retry limit
(``SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT``) has run out on a running job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.formats.keys import event_key
from tests.compat.smdebug_api.trials import end_job, write_steps

STEPS = list(range(0, 200, 9)) + [199]  # 0, 9, 18, ... 198, 199


def with_missing_event_files(root: Path, *, ended: bool) -> None:
    """Index files at every step of ``STEPS``; the event files of 9 and 199 deleted."""
    write_steps(root, STEPS, prefix="grad", count=1)
    for step in (9, 199):
        (root / event_key(step, "worker_0")).unlink()
    if ended:
        end_job(root)


@pytest.fixture
def one_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    from smdebug.core.config_constants import MISSING_EVENT_FILE_RETRY_LIMIT_KEY

    monkeypatch.setenv(MISSING_EVENT_FILE_RETRY_LIMIT_KEY, "1")


@pytest.mark.usefixtures("one_retry")
@pytest.mark.parametrize("ended", [True, False])
def test_a_present_event_file_reads(tmp_path: Path, ended: bool) -> None:
    """The value of a step whose event file exists is read, finished job or not."""
    from smdebug.trials import create_trial

    with_missing_event_files(tmp_path, ended=ended)
    value = create_trial(str(tmp_path)).tensor("grad_0").value(0)
    np.testing.assert_array_equal(value, np.zeros((3, 3), np.float32))


@pytest.mark.usefixtures("one_retry")
@pytest.mark.parametrize("ended", [True, False])
@pytest.mark.parametrize("step", [9, 199])
def test_a_missing_event_file_is_tensor_unavailable_for_step(
    tmp_path: Path, ended: bool, step: int
) -> None:
    """A missing file, with a later one of the same worker present (9) or not (199), ends in
    TensorUnavailableForStep: at once when the job has ended, after the retries otherwise."""
    from smdebug.exceptions import TensorUnavailableForStep
    from smdebug.trials import create_trial

    with_missing_event_files(tmp_path, ended=ended)
    trial = create_trial(str(tmp_path))
    assert trial.options.missing_event_file_timeout == 2.0
    with pytest.raises(TensorUnavailableForStep) as raised:
        trial.tensor("grad_0").value(step)
    assert raised.value.step == step
    assert trial.data_problem_count == 1
