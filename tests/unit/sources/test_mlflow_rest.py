"""Reading a tracking server's histories (evaluator.sources.mlflow.rest) against a stand-in for
MLflow's HTTP helper: the bulk request first, ``get-history`` for a key the bulk answer may
have cut and for a server without the bulk request, NaN as each request spells it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlflow")

from evaluator.sources.mlflow import rest  # noqa: E402


@dataclass
class Answer:
    status_code: int
    content: bytes
    text: str = ""


class FakeServer:
    """Answers MLflow's two history requests from ``histories`` (key -> [(step, value)]);
    ``no_bulk`` set, answers the bulk request with that (status, body) instead."""

    def __init__(self, histories: dict[str, list[tuple[int, float]]]) -> None:
        self.histories = histories
        self.no_bulk: tuple[int, bytes] | None = None
        self.asked: list[tuple[str, str]] = []

    def __call__(self, creds: Any, endpoint: str, method: str, **kw: Any) -> Answer:
        params = kw["params"]
        self.asked.append((endpoint, params["metric_key"]))
        points = self.histories[params["metric_key"]]
        if endpoint == rest.BULK_ENDPOINT:
            if self.no_bulk is not None:
                return Answer(*self.no_bulk)
            cut = points[: int(params["max_results"])]
            rows = [{"key": "k", "step": s, "timestamp": i, "value": v, "run_id": "r"}
                    for i, (s, v) in enumerate(cut)]  # fmt: skip
            return Answer(200, json.dumps({"metrics": rows}).encode())  # NaN bare, as Flask
        rows = [
            {"step": str(s), "timestamp": str(i), "value": "NaN" if math.isnan(v) else v}
            for i, (s, v) in enumerate(points)
        ]
        return Answer(200, json.dumps({"metrics": rows}).encode())


class Store:
    def get_host_creds(self) -> object:
        return object()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer({"a": [(0, 1.0), (1, math.nan), (2, 3.0)], "b": [(5, 2.5)]})
    monkeypatch.setattr("mlflow.utils.rest_utils.http_request", fake)
    return fake


def test_a_history_comes_from_the_bulk_request_nan_included(server: FakeServer) -> None:
    """One bulk request per key; its bare NaN (Python's json) reads as NaN."""
    reader = rest.ServerReader(Store(), timeout=5)
    steps, stamps, values = reader.history("r", "a")
    assert steps.tolist() == [0, 1, 2] and stamps.tolist() == [0, 1, 2]
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == 3.0
    assert server.asked == [(rest.BULK_ENDPOINT, "a")] and reader.bulk_works


def test_a_bulk_answer_that_may_be_cut_is_read_again_whole(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk answer holding BULK_MOST values may be cut: get-history gives the whole key."""
    monkeypatch.setattr(rest, "BULK_MOST", 2)
    steps, _, values = rest.ServerReader(Store(), timeout=5).history("r", "a")
    assert steps.tolist() == [0, 1, 2] and values[2] == 3.0
    assert server.asked == [(rest.BULK_ENDPOINT, "a"), (rest.HISTORY_ENDPOINT, "a")]


@pytest.mark.parametrize(
    "answer",
    [(404, b'{"error_code": "ENDPOINT_NOT_FOUND"}'), (405, b""), (200, b"<html>app</html>")],
)
def test_a_server_without_the_bulk_request_is_read_by_get_history(
    server: FakeServer, answer: tuple[int, bytes]
) -> None:
    """A bulk answer that is an error or not MLflow's JSON (a proxy's page): get-history, for
    that key and every later one, with no bulk request asked again."""
    server.no_bulk = answer
    reader = rest.ServerReader(Store(), timeout=5)
    a = reader.history("r", "a")
    b = reader.history("r", "b")
    assert np.isnan(a[2][1]) and b[0].tolist() == [5] and b[2].tolist() == [2.5]
    assert not reader.bulk_works
    assert server.asked == [
        (rest.BULK_ENDPOINT, "a"),
        (rest.HISTORY_ENDPOINT, "a"),
        (rest.HISTORY_ENDPOINT, "b"),
    ]
