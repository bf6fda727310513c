"""MLflow's HTTP retries fitted inside mlflow_request_deadline (evaluator/sources/mlflow/
http_budget.py): the budget ends within the deadline, reaches MLflow's client through its
variables, and a value the user set is kept."""

from __future__ import annotations

import os

import pytest

from evaluator.sources.mlflow.http_budget import HttpBudget, fit_mlflow_retries

_VARIABLES = (
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER",
)


def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's variables unset for the test, and restored after it whatever it set."""
    for name in _VARIABLES:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("deadline", "attempts", "timeout"),
    [(30, 2, 15), (31, 2, 15), (2, 2, 1), (5, 2, 2), (1.5, 1, 1), (0.2, 1, 1), (600, 2, 300)],
)
def test_the_budget_ends_within_the_deadline(deadline: float, attempts: int, timeout: int) -> None:
    """Two attempts of half the deadline, in whole seconds; one of at least 1 s under 2 s."""
    budget = HttpBudget.within(deadline)
    assert (budget.attempts, budget.timeout) == (attempts, timeout)
    assert budget.attempts * budget.timeout <= max(deadline, 1)


def test_the_budget_reaches_mlflows_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset variables get the budget; a later call with another deadline sets its own."""
    _unset(monkeypatch)
    fit_mlflow_retries(30)

    assert [os.environ[n] for n in _VARIABLES] == ["1", "15", "0", "0"]
    fit_mlflow_retries(4)
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "2"


def test_a_users_own_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable the user set is left as given; the others still follow the deadline."""
    _unset(monkeypatch)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "77")
    fit_mlflow_retries(30)

    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "77"
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
