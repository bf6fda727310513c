"""MLflow runs written by the real ``mlflow`` library, and a real ``mlflow server`` on 127.0.0.1.

``log_run`` logs ``(key, step, value)`` metrics to a tracking store through MLflow's own client
(SQLite, a file store, a server); ``hf_mlflow_metrics`` gives what Hugging Face's
``MLflowCallback`` logs for a ``trainer_state.json``'s history (each log entry's numbers under
their own keys, ``loss``, ``eval_loss``, ``grad_norm`` ..., at the entry's global step), so a
wild run's state can be logged to MLflow as that callback would have. ``start_server`` runs
``mlflow server`` over a SQLite store, skipping loudly when it cannot start (failing under
CI=true).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["hf_mlflow_metrics", "log_run", "start_server"]

SERVER_START_SECONDS = 90.0
_BATCH = 1000  # MLflow's log_batch takes at most 1000 metrics a request


def log_run(
    tracking_uri: str,
    metrics: Iterable[tuple[str, int, float]],
    *,
    experiment: str = "rules",
    run_name: str | None = None,
    parent: str | None = None,
    status: str | None = "FINISHED",
) -> str:
    """A new run holding ``metrics``, logged through MLflow's client; its id. ``status``
    None leaves it RUNNING; ``parent`` makes it a child run of that run."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = (
        found.experiment_id
        if found
        else client.create_experiment(experiment, artifact_location=_artifacts(tracking_uri))
    )
    tags = {"mlflow.parentRunId": parent} if parent else {}
    run_id: str = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now + i, int(s)) for i, (k, s, v) in enumerate(metrics)]
    for start in range(0, len(batch), _BATCH):
        client.log_batch(run_id, metrics=batch[start : start + _BATCH])
    if status is not None:
        client.set_terminated(run_id, status)
    return run_id


def _artifacts(tracking_uri: str) -> str | None:
    """A SQLite store's artifacts beside its file (MLflow's default, ./mlruns, is the working
    folder: the checkout); None (the store's own choice) for the others."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    return None


def hf_mlflow_metrics(state: Path) -> list[tuple[str, int, float]]:
    """What Hugging Face's MLflowCallback logs for the history of the trainer state ``state``:
    every int or float of each entry (but ``step``), under its own key, at the entry's step."""
    history = json.loads(state.read_text())["log_history"]
    out: list[tuple[str, int, float]] = []
    for entry in history:
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        for key, value in entry.items():
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                out.append((key, step, float(value)))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"mlflow server could not start: {why}")
    pytest.skip(f"SKIPPED LOUDLY: mlflow server could not start: {why}")


@contextmanager
def start_server(folder: Path, *, workers: int = 1) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 over a SQLite store in ``folder`` (``server.db``), with
    ``workers`` worker processes; its URL."""
    port = _free_port()
    log = (folder / "server.log").open("wb")
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers),
               "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
               "--default-artifact-root", str(folder / "artifacts")]  # fmt: skip
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, folder / "server.log")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_healthy(url: str, process: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _unavailable(f"exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    _unavailable(f"no answer on {url}/health after {SERVER_START_SECONDS:g} s")
