"""An experiment's runs as one search shows them (evaluator/sources/mlflow/experiment.py):
which are phase children read with their parent, and calls under a deadline whose failures
are ClientErrors naming the store without credentials."""

from __future__ import annotations

import threading

import pytest

from evaluator.errors import ClientError
from evaluator.sources.mlflow.experiment import ExperimentRun, with_deadline


@pytest.mark.parametrize(
    ("name", "parent", "phase_child"),
    [
        ("train", "p1", True),
        ("val", "p1", True),
        ("validation", "p1", True),
        ("train", None, False),  # a top-level run named train is a run of its own
        ("trial-7", "p1", False),  # a sweep's child: a run of its own
        ("", "p1", False),
    ],
)
def test_only_a_phase_named_child_is_read_with_its_parent(
    name: str, parent: str | None, phase_child: bool
) -> None:
    """A child run named for a phase is its parent's (MlflowSource folds it in); a sweep's
    child or a top-level run is watched on its own."""
    assert ExperimentRun("r", name, "RUNNING", parent).is_phase_child is phase_child


def test_a_call_past_its_deadline_names_the_store_without_credentials() -> None:
    """A call that does not answer in time is a ClientError naming the store without its
    user name and password; the call's thread is not waited for."""
    release = threading.Event()
    with pytest.raises(ClientError, match=r"http://host:5000 did not answer \(search_runs\)") as e:
        with_deadline(lambda: release.wait(30), 0.2, "search_runs", "http://bob:pw@host:5000")
    release.set()
    assert "pw" not in str(e.value) and "bob" not in str(e.value)


def test_a_failing_call_is_a_client_error_without_credentials() -> None:
    """MLflow's exception, whose text holds the store's URI, comes back as a ClientError with
    the URI shown without its password."""

    def fail() -> None:
        raise RuntimeError("cannot reach http://bob:pw@host:5000/api\nmore")

    with pytest.raises(ClientError, match=r"search_runs on http://host:5000 failed") as e:
        with_deadline(fail, 5, "search_runs", "http://bob:pw@host:5000")
    assert "pw" not in str(e.value) and "more" not in str(e.value)


def test_a_refused_connection_says_the_store_could_not_be_reached() -> None:
    """MLflow's exception raised from a refused connection: the store could not be reached,
    and why, without credentials."""

    def refuse() -> None:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as e:
            raise RuntimeError("API request to http://bob:pw@host:5000/api failed") from e

    with pytest.raises(ClientError, match=r"host:5000 could not be reached \(search_runs: Conn"):
        with_deadline(refuse, 5, "search_runs", "http://bob:pw@host:5000")


def test_a_request_that_timed_out_is_a_store_that_did_not_answer() -> None:
    """MLflow's exception raised from a timeout reads as the deadline's own message."""

    def time_out() -> None:
        try:
            raise TimeoutError("read timed out")
        except OSError as e:
            raise RuntimeError("API request failed with timeout exception") from e

    with pytest.raises(ClientError, match=r"did not answer \(get_experiment\) within 5 s"):
        with_deadline(time_out, 5, "get_experiment", "http://host:5000")
