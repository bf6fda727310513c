"""The runs of an MLflow experiment, as ``rule-evaluator watch --mlflow-experiment`` finds them:
the finder the watch asks at every look, in place of a folder's (``container.discovery``).

Each run is named ``<experiment_id>/<run_id>`` (where its outputs go under the output folder,
and what ``--shard`` hashes) and evaluated at ``runs:/<run_id>``; its MLflow run name is its
title in ``watch_status.json``. A phase child run (``train`` / ``val`` under a parent) is
read with its parent, never as a run of its own. A run is evaluated once it has logged a
metric (its own, or a phase child's) or has ended; until then it is held, listed as
``Waiting``, with no process. A run with no metrics of its own whose child runs are runs of
their own (a sweep's trials) is a sweep's parent, held as ``ParentRun``: its children are the
runs evaluated. The search tells both (each run's latest metrics, its parent tag), so holding
costs no request.

A look never waits for MLflow: it starts one search of the experiment's runs in a thread of
its own (``evaluator.sources.mlflow.experiment.list_runs``: one search, paginated) and
answers with what the last finished search found, so a slow or unreachable store delays
finding new runs, never the watch's following of its live runs or its stop. A search that
fails is a problem of that look (counted and said by the watch), the runs found before kept.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from container.discovery import Discovery, Held, Run
from evaluator.config import trial_options_from_env
from evaluator.errors import ClientError, ConfigurationError
from evaluator.sources.mlflow.client import ENDED_STATUSES
from evaluator.sources.mlflow.experiment import (
    Experiment,
    ExperimentRun,
    find_experiment,
    list_runs,
    store_client,
)
from evaluator.sources.mlflow.location import RUNS_PREFIX, store_uri

if TYPE_CHECKING:
    from container.watch.request import WatchRequest

__all__ = [
    "MLFLOW_PRELOAD",
    "PARENT_RUN",
    "WAITING",
    "ExperimentFinder",
    "children_by_parent",
    "experiment_finder",
    "held",
]

# What an MLflow run's evaluation loads beyond the fork server's own list: loaded once there,
# shared by every run (docs/watch.md, "What it costs").
MLFLOW_PRELOAD = (
    "evaluator.sources.mlflow.client",
    "evaluator.sinks.mlflow_write_back",
    "mlflow.tracking",
    "mlflow.store.tracking.rest_store",
    "mlflow.store.tracking.sqlalchemy_store",
)

_STORE_VARIABLES = ("EVALUATOR_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI")
PARENT_RUN = "ParentRun"  # the watch's status of a sweep's parent run: its children evaluated
WAITING = "Waiting"  # a run with no metric yet: no process until it logs one
_NAMED_CHILDREN = 3  # child runs named in a parent run's message


def experiment_finder(request: WatchRequest, env: dict[str, str]) -> ExperimentFinder:
    """The finder of the experiment ``request`` names, in its store (``--mlflow-tracking-uri``,
    else the variables of ``env``); ``env``, every run's environment, left naming that store
    once, as ``MLFLOW_TRACKING_URI`` (never on a run's command line: it may hold a password)."""
    assert request.experiment is not None
    given = request.tracking_uri or next(
        (env[v].strip() for v in _STORE_VARIABLES if env.get(v, "").strip()), None
    )
    if given is None:
        raise ConfigurationError(
            f"--mlflow-experiment {request.experiment}: say which MLflow tracking store holds "
            "it with --mlflow-tracking-uri URI or the MLFLOW_TRACKING_URI variable "
            "(sqlite:///path/mlflow.db, http://host:port, or an mlruns folder)"
        )
    for variable in _STORE_VARIABLES:
        env.pop(variable, None)
    env["MLFLOW_TRACKING_URI"] = given
    deadline = trial_options_from_env(env).mlflow_request_deadline
    return ExperimentFinder(store_uri(given), request.experiment, deadline=deadline)


class ExperimentFinder:
    """The runs of one experiment; ``find`` as ``RunFinder.find``."""

    def __init__(self, tracking_uri: str, wanted: str, *, deadline: float) -> None:
        """ClientError when the store cannot be read or holds no such experiment."""
        self._client = store_client(tracking_uri, deadline=deadline)
        self.experiment: Experiment = find_experiment(
            self._client, tracking_uri, wanted, deadline=deadline
        )
        self._deadline = deadline
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._searching = False
        self._found: list[ExperimentRun] = []
        self._problem: str | None = None  # the last search's failure, said by the next look

    def find(self) -> Discovery:
        """The runs the last finished search found; the next search started."""
        with self._lock:
            children = children_by_parent(self._found)
            runs = [
                self._run(r, held(r, children.get(r.run_id, [])))
                for r in self._found
                if not r.is_phase_child
            ]
            found = Discovery(runs=runs)
            if self._problem is not None:
                found.problems.append(self._problem)
                self._problem = None
            if not self._searching:
                self._searching = True
                threading.Thread(target=self._search, name="mlflow-experiment", daemon=True).start()
        return found

    def wait(self, timeout: float) -> bool:
        """Wait until no search is under way; whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._searching, timeout)

    def _search(self) -> None:
        runs, problem = self._found, None
        try:
            runs = list_runs(self._client, self.experiment, deadline=self._deadline)
        except ClientError as e:
            problem = f"MLflow experiment {self.experiment.shown}: {e}"
        finally:  # whatever happened, the next look starts a search again
            with self._idle:
                self._found, self._problem, self._searching = runs, problem, False
                self._idle.notify_all()

    def _run(self, run: ExperimentRun, held: Held | None) -> Run:
        name = f"{self.experiment.experiment_id}/{run.run_id}"
        return Run(name, f"{RUNS_PREFIX}{run.run_id}", title=run.name or None, held=held)


def children_by_parent(runs: list[ExperimentRun]) -> dict[str, list[ExperimentRun]]:
    """The child runs of each parent run, by the parent's id."""
    found: dict[str, list[ExperimentRun]] = {}
    for run in runs:
        if run.parent_id is not None:
            found.setdefault(run.parent_id, []).append(run)
    return found


def held(run: ExperimentRun, children: list[ExperimentRun]) -> Held | None:
    """Why ``run`` is not to be evaluated yet, or None. Without a metric (its own or a phase
    child run's), it is a sweep's parent when its child runs are all runs of their own (each
    evaluated on its own), else a run that has logged nothing yet (evaluated once it does, or
    once it has ended: the single run then says it ended without metrics)."""
    phases = [c for c in children if c.is_phase_child]
    if run.has_metrics or any(c.has_metrics for c in phases):
        return None
    if children and not phases:
        return Held(PARENT_RUN, _parent_message(children))
    if run.status in ENDED_STATUSES:
        return None
    return Held(WAITING, "no metric logged yet: evaluated once it logs one (or ends)")


def _parent_message(children: list[ExperimentRun]) -> str:
    names = ", ".join(c.name or c.run_id for c in children[:_NAMED_CHILDREN])
    left = len(children) - _NAMED_CHILDREN
    return (
        f"a parent run with no metrics of its own: its {len(children)} child run(s) "
        f"({names}{f' and {left} more' if left > 0 else ''}) are evaluated as runs of their own"
    )
