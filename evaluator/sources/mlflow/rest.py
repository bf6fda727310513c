"""Metric histories from an MLflow tracking server, over HTTP, sent by MLflow's own helper
(``mlflow.utils.rest_utils.http_request``: the store's credentials, TLS settings and retries)
and read straight into numpy arrays.

The request is ``GET /api/2.0/mlflow/metrics/get-history``, MLflow's documented REST API, page
after page. MLflow's server has a cheaper one for whole histories (the bulk history request
its web UI draws charts from: about 30 % less server CPU per value, bench/mlflow_read.py
measures both), but it is not part of the documented API: its route, its cap on values per
answer and its spelling may change with any MLflow release, and a cap that changed unseen
would cut a history silently. So it is not used. What this module saves is the client's work:
MLflow's client makes a protobuf message and a ``Metric`` object per value (about 13 s of CPU
per million values); the answer is parsed here with orjson into three arrays (about 1 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from evaluator.sources.mlflow.http_budget import HttpBudget

__all__ = ["HISTORY_ENDPOINT", "ServerReader"]

HISTORY_ENDPOINT = "/api/2.0/mlflow/metrics/get-history"

Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # steps, timestamps, values


class ServerReader:
    """Reads histories from the tracking server behind MLflow's ``RestStore`` ``store``; safe
    to call from several threads at once."""

    def __init__(self, store: Any, *, budget: HttpBudget) -> None:
        self.store = store
        self.budget = budget

    def history(self, run_id: str, key: str) -> Columns:
        """Every (step, timestamp, value) MLflow holds for ``key`` of the run ``run_id``:
        ``get-history``, page after page (a server gives one page unless it pages)."""
        from mlflow.utils import rest_utils

        verify: Any = rest_utils.verify_rest_response  # untyped in MLflow
        metrics: list[Any] = []
        params = {"run_id": run_id, "metric_key": key}
        while True:
            answer = verify(self._get(HISTORY_ENDPOINT, params), HISTORY_ENDPOINT)
            document = orjson.loads(answer.content)
            metrics += document.get("metrics", ())
            token = document.get("next_page_token")
            if not token:
                return _columns(metrics)
            params["page_token"] = token

    def _get(self, endpoint: str, params: dict[str, str]) -> Any:
        from mlflow.utils import rest_utils

        http_request: Any = rest_utils.http_request  # untyped in MLflow
        creds = self.store.get_host_creds()
        options = self.budget.request_options()
        return http_request(creds, endpoint, "GET", params=params, **options)


def _columns(metrics: list[Any]) -> Columns:
    """Steps, timestamps and values of metrics as MLflow's JSON spells them (proto3's JSON
    writes int64 as strings and non-finite doubles as ``"NaN"``/``"Infinity"``; numpy reads
    both)."""
    steps = [m.get("step", 0) for m in metrics]
    stamps = [m.get("timestamp", 0) for m in metrics]
    values = [m.get("value", 0.0) for m in metrics]
    return (
        np.array(steps, np.int64),
        np.array(stamps, np.int64),
        np.array(values, np.float64),
    )
