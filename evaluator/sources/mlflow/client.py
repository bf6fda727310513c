"""The one door to MLflow: its maintained client (``mlflow-skinny``, the optional extra
``rule-evaluator[mlflow]``), called from a thread of its own under a deadline, its exceptions
turned into ``ClientError``s that name the run and the store without credentials.

``RunClient.run()`` reads the run's status, name and latest metrics (one request);
``RunClient.histories(keys)`` the whole history of each key, several keys at once (MLflow's
client has no request for several keys of a run, so the keys of a batch go out together, on
``PARALLEL`` threads). From a tracking server each history is one HTTP request read straight
into numpy arrays (``rest.ServerReader``: which request, and why); ``get_metric_history`` turns
every value into a protobuf message and then a ``Metric`` object, which costs several times the
request (bench/mlflow_read.py). The other stores (SQLite, a file store) are read with
``get_metric_history``. A call that has not answered within ``deadline`` seconds (the trial
option ``mlflow_request_deadline``) is given up: an unreachable store fails then. MLflow's own
retries are fitted inside that deadline (``http_budget``), so the thread of a call given up on
ends by itself soon after, instead of retrying into later work.

MLflow writes +/-inf as +/-1.797e308 (the largest double): such values are read as
infinities; NaN is kept.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from evaluator.errors import ClientError
from evaluator.sources.mlflow.http_budget import HttpBudget, fit_mlflow_retries
from evaluator.sources.mlflow.location import RunLocation, shown_uri
from evaluator.sources.mlflow.rest import ServerReader

__all__ = [
    "ENDED_STATUSES",
    "History",
    "RunClient",
    "RunFacts",
    "check_store",
    "child_phase_runs",
    "did_not_answer",
    "mlflow_client",
    "unreachable",
]

PARALLEL = 8  # histories read at once
ENDED_STATUSES = frozenset({"FINISHED", "FAILED", "KILLED"})
_INFINITE = sys.float_info.max  # what MLflow stores for an infinite value
_T = TypeVar("_T")
_ALLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")  # "[Errno 111] Connection refused"


@dataclass(frozen=True)
class RunFacts:
    """What one request tells of a run: its status, name, experiment, and each metric key's
    latest (step, timestamp, value), which shows whether a key gained values since."""

    status: str
    name: str
    experiment_id: str
    latest: dict[str, tuple[int, int, float]]


@dataclass(frozen=True)
class History:
    """One key's values: sorted steps (each once: the value logged last at a step wins, as
    TensorBoard keeps the last) and their values, float64."""

    steps: np.ndarray
    values: np.ndarray


def mlflow_client(tracking_uri: str) -> Any:
    """MLflow's own ``MlflowClient`` for the store ``tracking_uri`` (ClientError naming the
    extra to install when MLflow is not installed)."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ClientError(
            "reading MLflow runs needs MLflow's client: pip install 'rule-evaluator[mlflow]' "
            "(the evaluator's image has it)"
        ) from None
    if tracking_uri.startswith("file://"):
        # MLflow 3.7+ opens a file store only with this set (it is in maintenance mode, and
        # refuses to start new ones); reading an existing one is what the evaluator does. A
        # user's own setting (false) is kept: the store then fails with MLflow's message.
        os.environ.setdefault(_ALLOW_FILE_STORE, "true")
    return MlflowClient(tracking_uri=tracking_uri)


class RunClient:
    """MLflow's client for one run, with a deadline on every call."""

    def __init__(self, run: RunLocation, *, deadline: float) -> None:
        self.run_location = run
        self.deadline = deadline
        self._client: Any = None
        self._server: ServerReader | None = None
        self._pool = ThreadPoolExecutor(PARALLEL, thread_name_prefix="mlflow")

    async def call(self, what: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(client, *args)`` in a daemon thread; ClientError on failure or after the
        deadline (the thread is not waited for: MLflow's retries, fitted to the deadline, end
        it)."""
        fit_mlflow_retries(self.deadline)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()

        def work() -> None:
            try:
                if self._client is None:
                    check_store(self.run_location.tracking_uri)
                    self._client = mlflow_client(self.run_location.tracking_uri)
                result: Any = fn(self._client, *args)
            except BaseException as e:  # handed to the waiting coroutine
                _hand_over(loop, done, None, e)
            else:
                _hand_over(loop, done, result, None)

        threading.Thread(target=work, name=f"mlflow-{what}", daemon=True).start()
        try:
            return await asyncio.wait_for(done, self.deadline)
        except TimeoutError:
            raise did_not_answer(self.run_location.tracking_uri, what, self.deadline) from None
        except ClientError:
            raise
        except Exception as e:
            raise _translated(e, what, self.run_location, self.deadline) from None

    async def run(self) -> RunFacts:
        """The run's status, name and latest metrics."""
        return await self.call("get_run", _run_facts, self.run_location.run_id)

    async def children(self, experiment_id: str) -> dict[str, str]:
        """The run's child runs: run id -> run name."""
        return await self.call("search_runs", _children, experiment_id, self.run_location.run_id)

    async def histories(self, run_id: str, keys: list[str]) -> dict[str, History]:
        """The history of each of ``keys`` of the run ``run_id``, read concurrently."""
        if not keys:
            return {}
        return await self.call("get_metric_history", self._read_all, run_id, keys)

    def _read_all(self, client: Any, run_id: str, keys: list[str]) -> dict[str, History]:
        server = self._server_reader(client)
        if server is None:
            read = list(self._pool.map(lambda k: client.get_metric_history(run_id, k), keys))
            return {key: history_of(metrics) for key, metrics in zip(keys, read)}
        found = self._pool.map(lambda k: history_from_arrays(*server.history(run_id, k)), keys)
        return dict(zip(keys, found))

    def _server_reader(self, client: Any) -> ServerReader | None:
        """The reader of a tracking server's histories (kept: it learns which requests the
        server has), or None for the other stores."""
        if self._server is None:
            store = _rest_store(client)
            if store is None:
                return None
            self._server = ServerReader(store, budget=HttpBudget.within(self.deadline))
        return self._server

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    done: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    """Give a call's outcome to the loop that waits for it; nothing when that loop has
    closed (the call was given up on at its deadline, and the trial closed since)."""
    with suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(_settle, done, result, error)


def _settle(done: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if done.done():  # given up on at the deadline
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)


def _run_facts(client: Any, run_id: str) -> RunFacts:
    run = client.get_run(run_id)
    latest = {m.key: (int(m.step), int(m.timestamp), float(m.value)) for m in run.data._metric_objs}
    info = run.info
    return RunFacts(str(info.status), str(info.run_name or ""), str(info.experiment_id), latest)


def _children(client: Any, experiment_id: str, run_id: str) -> dict[str, str]:
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'", max_results=100
    )
    return {r.info.run_id: str(r.info.run_name or "") for r in runs}


def history_of(metrics: list[Any]) -> History:
    """Steps and values of MLflow ``Metric``s: by step, the last logged (timestamp, then the
    order given) winning; +/-1.797e308 read as +/-inf."""
    if not metrics:
        return History(np.zeros(0, np.int64), np.zeros(0))
    steps = np.fromiter((m.step for m in metrics), np.int64, len(metrics))
    stamps = np.fromiter((m.timestamp for m in metrics), np.int64, len(metrics))
    values = np.fromiter((m.value for m in metrics), np.float64, len(metrics))
    return history_from_arrays(steps, stamps, values)


def history_from_arrays(steps: np.ndarray, stamps: np.ndarray, values: np.ndarray) -> History:
    """``history_of`` over arrays (negative steps, which no trial step can be, left out)."""
    order = np.lexsort((np.arange(len(steps)), stamps, steps))
    steps, values = steps[order], values[order]
    last = np.ones(len(steps), bool)
    last[:-1] = steps[1:] != steps[:-1]
    last &= steps >= 0
    values = values[last].copy()
    values[values >= _INFINITE] = np.inf
    values[values <= -_INFINITE] = -np.inf
    return History(steps[last], values)


def _rest_store(client: Any) -> Any:
    """The client's store when it talks to a tracking server (MLflow's ``RestStore``), else
    None."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    from mlflow.store.tracking.rest_store import RestStore

    return store if isinstance(store, RestStore) else None


def check_store(uri: str) -> None:
    """A SQLite file or file store that does not exist is a typo: said at once, before
    MLflow's client would create an empty store there."""
    for prefix in ("sqlite:///", "file://"):
        if uri.startswith(prefix):
            path = uri[len(prefix) :] if prefix == "file://" else uri[len("sqlite://") :]
            path = path.split("?", 1)[0]
            if prefix == "sqlite:///" and path.startswith("//"):
                path = path[1:]  # sqlite:////abs/path
            if not os.path.exists(path):
                raise ClientError(
                    f"MLflow tracking store {shown_uri(uri)}: {path} does not exist (a SQLite "
                    "store is its mlflow.db file, a file store its mlruns folder)"
                )


def did_not_answer(tracking_uri: str, what: str, deadline: float) -> ClientError:
    """The ClientError of a store that did not answer a call within its deadline."""
    return ClientError(
        f"MLflow tracking store {shown_uri(tracking_uri)} did not answer ({what}) within "
        f"{deadline:g} s (mlflow_request_deadline): check that it is up and reachable from here"
    )


def unreachable(
    error: BaseException, what: str, tracking_uri: str, deadline: float
) -> ClientError | None:
    """When ``error`` (MLflow's, or one it was raised from) is a request that timed out or a
    connection that failed: the ClientError saying so, else None."""
    seen: BaseException | None = error
    while seen is not None:
        name = type(seen).__name__
        if isinstance(seen, TimeoutError) or name in ("ReadTimeout", "ConnectTimeout"):
            return did_not_answer(tracking_uri, what, deadline)
        if isinstance(seen, ConnectionError) or name == "ConnectionError":  # or requests'
            reason = _ERRNO.search(str(seen))
            return ClientError(
                f"MLflow tracking store {shown_uri(tracking_uri)} could not be reached ({what}: "
                f"{reason.group(1) if reason else name}): check that it is up and reachable "
                "from here"
            )
        seen = seen.__cause__ or seen.__context__
    return None


def _translated(error: Exception, what: str, run: RunLocation, deadline: float) -> ClientError:
    """MLflow's exception as a ClientError naming the run and the store (no credentials)."""
    if (cut := unreachable(error, what, run.tracking_uri, deadline)) is not None:
        return cut
    code = getattr(error, "error_code", None)
    text = str(error).replace(run.tracking_uri, shown_uri(run.tracking_uri))
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    if code == "RESOURCE_DOES_NOT_EXIST" or "not found" in first.lower():
        return ClientError(
            f"MLflow run {run.shown} does not exist: check the run id (MLflow's UI shows it "
            f"on the run's page) and the tracking store ({first[:300]})"
        )
    return ClientError(
        f"MLflow {what} for {run.shown} failed: {type(error).__name__}: {first[:300]}"
    )


def child_phase_runs(children: dict[str, str], phase_of: Callable[[str], Any]) -> dict[str, Any]:
    """The child runs named for a phase (``train``, ``val``...): run id -> mode."""
    found = {rid: phase_of(name) for rid, name in children.items()}
    return {rid: mode for rid, mode in found.items() if mode is not None}
