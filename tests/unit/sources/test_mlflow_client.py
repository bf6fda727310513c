"""A call through ``RunClient`` (evaluator/sources/mlflow/client.py) given up on at its
deadline: a ClientError then, and its thread, answering later, ends quietly even after the
trial's loop has closed."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from evaluator.errors import ClientError
from evaluator.sources.mlflow.client import RunClient
from evaluator.sources.mlflow.location import RunLocation


def test_a_call_that_ends_after_its_loop_closed_ends_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call whose thread answers after the deadline, once the loop that waited for it
    has closed: the thread ends without an exception (nothing printed behind later work)."""
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"):  # fmt: skip
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)  # restored after the test, whatever the call sets
    release, failures = threading.Event(), []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    client = RunClient(RunLocation("http://host:5000", "r1"), deadline=0.2)
    client._client = object()  # a store already opened: the call goes straight to fn

    def slow(_client: Any) -> bool:
        return release.wait(10)

    try:
        with pytest.raises(ClientError, match=r"did not answer \(get_run\) within 0.2 s"):
            asyncio.run(client.call("get_run", slow))  # the loop is closed when it returns
        late = [t for t in threading.enumerate() if t.name == "mlflow-get_run"]
        release.set()
        for thread in late:
            thread.join(5)
    finally:
        client.close()
    assert late and failures == [] and not any(t.is_alive() for t in late)
