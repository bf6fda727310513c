"""Metric histories from an MLflow tracking server, over HTTP, sent by MLflow's own helper
(``mlflow.utils.rest_utils.http_request``: the store's credentials, TLS settings and retries)
and read straight into numpy arrays.

Two requests of the server can give a key's whole history, and they cost the server unequally
(bench/mlflow_read.py measures both):

* ``GET /ajax-api/2.0/mlflow/metrics/get-history-bulk`` (the request MLflow's own UI draws its
  charts from): the server turns each stored value into a plain dict and one ``json.dumps``,
  about 30 % less CPU per value than
* ``GET /api/2.0/mlflow/metrics/get-history`` (MLflow's documented REST API), where every value
  also becomes a protobuf message serialized by protobuf's JSON printer, field by field.

So the bulk request is asked first. It answers at most ``BULK_MOST`` values: a key that fills
that is read again with ``get-history``, which returns everything. A server without the bulk
request (a proxy that forwards ``/api/`` only, another vendor's server) answers it with an
error or a page that is not MLflow's JSON: ``ServerReader`` then uses ``get-history`` for the
rest of its life. Both give every value MLflow holds, in the same order.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

__all__ = ["BULK_ENDPOINT", "BULK_MOST", "HISTORY_ENDPOINT", "ServerReader"]

HISTORY_ENDPOINT = "/api/2.0/mlflow/metrics/get-history"
BULK_ENDPOINT = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"
BULK_MOST = 25_000  # the most values one bulk answer holds (the server's own cap)

Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # steps, timestamps, values


class ServerReader:
    """Reads histories from the tracking server behind MLflow's ``RestStore`` ``store``; safe
    to call from several threads at once."""

    def __init__(self, store: Any, *, timeout: float) -> None:
        self.store = store
        self.timeout = timeout
        self.bulk_works = True  # until the server shows it has no bulk request

    def history(self, run_id: str, key: str) -> Columns:
        """Every (step, timestamp, value) MLflow holds for ``key`` of the run ``run_id``."""
        if self.bulk_works:
            found = self._bulk(run_id, key)
            if found is not None and len(found[0]) < BULK_MOST:
                return found
        return self._paged(run_id, key)

    def _bulk(self, run_id: str, key: str) -> Columns | None:
        """The bulk request's answer, or None when the server has no such request."""
        params = {"run_id": run_id, "metric_key": key, "max_results": str(BULK_MOST)}
        answer = self._get(BULK_ENDPOINT, params)
        document = _json(answer.content) if answer.status_code == 200 else None
        if not isinstance(document, dict) or not isinstance(document.get("metrics"), list):
            self.bulk_works = False
            return None
        return _columns(document["metrics"])

    def _paged(self, run_id: str, key: str) -> Columns:
        """``get-history``, page after page (a server gives one page unless it pages)."""
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
        return http_request(creds, endpoint, "GET", params=params, timeout=self.timeout)


def _json(body: bytes) -> Any:
    """A JSON body, or None. The bulk answer is written by Python's ``json``, which spells NaN
    as a bare ``NaN`` that orjson refuses: such a body is read by ``json`` instead."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            return json.loads(body)
        except ValueError:
            return None


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
