"""An MLflow experiment's runs, through MLflow's own client: what ``rule-evaluator watch
--mlflow-experiment`` looks at (docs/watch.md). Synchronous calls, each under a deadline.

``find_experiment`` takes the experiment a user named (its name, else its id) and is a
ClientError naming it and the store when the store holds no such live experiment.
``list_runs`` is one search of the experiment's live runs (``search_runs``, page after page,
oldest first): the watch's one request per look, never one per run. A run's phase child runs
(``train`` / ``val`` runs logged with ``nested=True``, which ``MlflowSource`` reads as its
modes) are marked, so that they are not taken as runs of their own; each run says whether
it has logged a metric of its own (the search gives every run's latest metrics).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from evaluator.errors import ClientError
from evaluator.formats.metric_names import phase_of_folder
from evaluator.sources.mlflow.client import (
    check_store,
    did_not_answer,
    mlflow_client,
    unreachable,
)
from evaluator.sources.mlflow.http_budget import fit_mlflow_retries
from evaluator.sources.mlflow.location import shown_uri

__all__ = ["Experiment", "ExperimentRun", "find_experiment", "list_runs", "store_client"]

PAGE = 1000  # runs per page of a search (MLflow's own default)
_PARENT_TAG = "mlflow.parentRunId"
_NOT_FOUND = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")  # get_experiment's "no such id"
_T = TypeVar("_T")


@dataclass(frozen=True)
class Experiment:
    """One experiment: its id and name, in the store ``tracking_uri``."""

    tracking_uri: str
    experiment_id: str
    name: str

    @property
    def shown(self) -> str:
        """The experiment for messages: its name and id, the store without credentials."""
        return f"{self.name!r} (id {self.experiment_id}) in {shown_uri(self.tracking_uri)}"


@dataclass(frozen=True)
class ExperimentRun:
    """A run of the experiment, as one search shows it."""

    run_id: str
    name: str
    status: str
    parent_id: str | None
    has_metrics: bool = False  # whether it has logged a metric of its own

    @property
    def is_phase_child(self) -> bool:
        """Whether the run is a phase of its parent (a child named ``train``, ``val`` ...),
        read with it, never on its own."""
        return self.parent_id is not None and phase_of_folder(self.name) is not None


def store_client(tracking_uri: str, *, deadline: float) -> Any:
    """MLflow's client for the store (a SQLite file or file store that does not exist is a
    ClientError at once, before MLflow would create it)."""
    check_store(tracking_uri)
    return with_deadline(lambda: mlflow_client(tracking_uri), deadline, "open", tracking_uri)


def find_experiment(client: Any, tracking_uri: str, wanted: str, *, deadline: float) -> Experiment:
    """The live experiment named ``wanted`` (or, failing a name, whose id it is)."""

    def find() -> Any:
        found = client.get_experiment_by_name(wanted)
        if found is None:
            try:
                found = client.get_experiment(wanted)
            except Exception as e:
                if getattr(e, "error_code", None) not in _NOT_FOUND:
                    raise
                return None
        return found

    found = with_deadline(find, deadline, "get_experiment", tracking_uri)
    if found is None or getattr(found, "lifecycle_stage", "active") != "active":
        state = "holds no experiment" if found is None else "has deleted the experiment"
        raise ClientError(
            f"MLflow tracking store {shown_uri(tracking_uri)} {state} named {wanted!r} (nor "
            "with that id): check --mlflow-experiment (the name or id MLflow's UI shows) and "
            "the store (--mlflow-tracking-uri or MLFLOW_TRACKING_URI)"
        )
    return Experiment(tracking_uri, str(found.experiment_id), str(found.name))


def list_runs(
    client: Any, experiment: Experiment, *, deadline: float, page_size: int = PAGE
) -> list[ExperimentRun]:
    """Every live run of the experiment, oldest first: one search, all its pages."""

    def search() -> list[ExperimentRun]:
        runs: list[ExperimentRun] = []
        token: str | None = None
        while True:
            page = client.search_runs(
                [experiment.experiment_id],
                max_results=page_size,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            runs += [_run(r) for r in page]
            token = page.token
            if not token:
                return runs

    return with_deadline(search, deadline, "search_runs", experiment.tracking_uri)


def _run(run: Any) -> ExperimentRun:
    parent = run.data.tags.get(_PARENT_TAG)
    info = run.info
    return ExperimentRun(
        str(info.run_id),
        str(info.run_name or ""),
        str(info.status),
        str(parent) if parent else None,
        has_metrics=bool(run.data.metrics),
    )


def with_deadline(fn: Callable[[], _T], deadline: float, what: str, tracking_uri: str) -> _T:
    """``fn()`` in a daemon thread (never waited for past ``deadline``; MLflow's own retries,
    fitted to it, end the thread soon after); its failure as a ClientError naming the store
    without credentials."""
    fit_mlflow_retries(deadline)
    done = threading.Event()
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append((fn(), None))
        except BaseException as e:  # handed to the caller
            outcome.append((None, e))
        done.set()

    threading.Thread(target=work, name=f"mlflow-{what}", daemon=True).start()
    if not done.wait(deadline):
        raise did_not_answer(tracking_uri, what, deadline)
    result, error = outcome[0]
    if error is None:
        return result  # type: ignore[no-any-return]
    if isinstance(error, ClientError):
        raise error
    if (cut := unreachable(error, what, tracking_uri, deadline)) is not None:
        raise cut
    store = shown_uri(tracking_uri)
    text = str(error).replace(tracking_uri, store).strip()
    first = text.splitlines()[0][:300] if text else type(error).__name__
    raise ClientError(f"MLflow {what} on {store} failed: {type(error).__name__}: {first}")
