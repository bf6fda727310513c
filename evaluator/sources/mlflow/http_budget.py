"""MLflow's own HTTP retries, fitted inside ``mlflow_request_deadline``.

MLflow's client retries a request that fails or goes unanswered by itself: by default 7 retries,
each attempt given 120 s, with a backoff doubling from 2 s (about 4 minutes against a refused
connection, a quarter of an hour against a server that accepts and never answers). The evaluator
gives up on a call at its deadline, but it cannot stop the thread that made it: left with
MLflow's defaults, that thread went on retrying (and logging each retry) long after, into later
work. So every request the evaluator makes to a tracking server gets a budget that ends within
the deadline: two attempts of half the deadline each, the second at once (urllib3 does not wait
before a first retry); a deadline under 2 s gets one attempt of at least 1 s (MLflow reads its
timeout in whole seconds). A server that answers with ``Retry-After`` is still waited for, as
MLflow's client does.

The budget reaches MLflow's client through MLflow's documented variables
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, ``_TIMEOUT``, ``_BACKOFF_FACTOR``, ``_BACKOFF_JITTER``),
which it reads at every request: set in this process unless the user set them (a value the
user gave is kept, and so are its retries). The history reader's own requests take the budget
as arguments (``request_options``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["HttpBudget", "fit_mlflow_retries"]

_SET_HERE: dict[str, str] = {}  # what this process set, told apart from the user's own value
_LOCK = threading.Lock()


@dataclass(frozen=True)
class HttpBudget:
    """How many attempts a request gets, and the seconds each may take."""

    attempts: int
    timeout: int

    @classmethod
    def within(cls, deadline: float) -> HttpBudget:
        """The budget that ends within ``deadline`` seconds (at least one attempt of 1 s)."""
        attempts = 2 if deadline >= 2 else 1
        return cls(attempts, max(1, int(deadline / attempts)))

    def request_options(self) -> dict[str, Any]:
        """The budget as ``mlflow.utils.rest_utils.http_request``'s arguments."""
        return {
            "max_retries": self.attempts - 1,
            "backoff_factor": 0,
            "backoff_jitter": 0.0,
            "timeout": self.timeout,
        }

    def variables(self) -> dict[str, str]:
        """The budget as MLflow's environment variables."""
        return {
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(self.attempts - 1),
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.timeout),
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
            "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
        }


def fit_mlflow_retries(deadline: float) -> HttpBudget:
    """Set MLflow's retry variables in this process to the budget of ``deadline``, each
    unless the user set it; the budget. Called before every call, so that each call has its
    own deadline's budget (calls with different deadlines at once share the last one set)."""
    budget = HttpBudget.within(deadline)
    with _LOCK:
        for name, value in budget.variables().items():
            given = os.environ.get(name)
            if given is None or given == _SET_HERE.get(name):
                os.environ[name] = _SET_HERE[name] = value
    return budget
