"""Reading a tracking server's histories (evaluator.sources.mlflow.rest) against a stand-in for
MLflow's HTTP helper: ``get-history`` page after page, int64 and non-finite values as proto3's
JSON spells them, a server's error said as MLflow says it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("mlflow")

from mlflow.exceptions import MlflowException  # noqa: E402

from evaluator.sources.mlflow import rest  # noqa: E402
from evaluator.sources.mlflow.http_budget import HttpBudget  # noqa: E402


@dataclass
class Answer:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()


class FakeServer:
    """Answers get-history from ``histories`` (key -> [(step, value)]), ``page`` values an
    answer, with a next_page_token while more remain."""

    def __init__(self, histories: dict[str, list[tuple[int, float]]], page: int = 1000) -> None:
        self.histories = histories
        self.page = page
        self.asked: list[tuple[str, str, str | None]] = []
        self.options: list[dict[str, Any]] = []  # each request's other arguments

    def __call__(self, creds: Any, endpoint: str, method: str, **kw: Any) -> Answer:
        params = kw["params"]
        key, token = params["metric_key"], params.get("page_token")
        self.asked.append((endpoint, key, token))
        self.options.append({k: v for k, v in kw.items() if k != "params"})
        if key not in self.histories:
            error = {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"no metric {key}"}
            return Answer(404, json.dumps(error).encode())
        start = int(token or 0)
        points = self.histories[key][start : start + self.page]
        rows = [{"step": str(s), "timestamp": str(start + i), "value": _spelled(v)}
                for i, (s, v) in enumerate(points)]  # fmt: skip
        document: dict[str, Any] = {"metrics": rows}
        if start + self.page < len(self.histories[key]):
            document["next_page_token"] = str(start + self.page)
        return Answer(200, json.dumps(document).encode())


def _spelled(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


class Store:
    def get_host_creds(self) -> object:
        return object()


HISTORIES = {"a": [(0, 1.0), (1, math.nan), (2, 3.0), (3, -math.inf), (4, 5.0)], "b": [(5, 2.5)]}


def _reader() -> rest.ServerReader:
    return rest.ServerReader(Store(), budget=HttpBudget.within(5))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer(HISTORIES)
    monkeypatch.setattr("mlflow.utils.rest_utils.http_request", fake)
    return fake


def test_a_history_is_one_get_history_request_with_proto3_spellings(server: FakeServer) -> None:
    """One documented request per key; int64 as strings, NaN and -Infinity as strings."""
    steps, stamps, values = _reader().history("r", "a")
    assert steps.tolist() == [0, 1, 2, 3, 4] and stamps.tolist() == [0, 1, 2, 3, 4]
    assert values[0] == 1.0 and math.isnan(values[1]) and values[3] == -math.inf
    assert server.asked == [(rest.HISTORY_ENDPOINT, "a", None)]


def test_a_paged_history_is_read_to_its_last_page(server: FakeServer) -> None:
    """A server that pages: every page is asked for with the token it gave, in order."""
    server.page = 2
    steps, _, values = _reader().history("r", "a")
    assert steps.tolist() == [0, 1, 2, 3, 4] and values[4] == 5.0
    assert [token for _, _, token in server.asked] == [None, "2", "4"]


def test_a_servers_error_is_mlflows_own(server: FakeServer) -> None:
    """An error answer raises what MLflow's own client raises for it, its message kept."""
    with pytest.raises(MlflowException, match="no metric missing"):
        _reader().history("r", "missing")


def test_each_request_carries_the_deadlines_budget(server: FakeServer) -> None:
    """Every page is asked with retries and timeouts that end within the deadline: two
    attempts of half of it, no backoff."""
    server.page = 2
    rest.ServerReader(Store(), budget=HttpBudget.within(30)).history("r", "a")
    expected = {"max_retries": 1, "backoff_factor": 0, "backoff_jitter": 0.0, "timeout": 15}
    assert server.options == [expected] * 3
