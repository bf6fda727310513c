"""Where an MLflow run is: its tracking store and run id, from the trial location the user gave.
Pure functions of strings and paths, no request.

Two spellings reach a run: MLflow's own ``runs:/<run_id>``, whose tracking store is the
``mlflow_tracking_uri`` trial option (``--mlflow-tracking-uri``, or ``MLFLOW_TRACKING_URI`` as
MLflow reads it: ``sqlite:///mlflow.db``, ``http://host:5000``, ``file:///path/mlruns`` or a
plain ``mlruns`` path); and a legacy file store's run folder given as a path,
``mlruns/<experiment_id>/<run_id>`` (its store is the folder two levels up). Messages name a
store with ``shown_uri``: user name and password never appear.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from evaluator.errors import ConfigurationError

__all__ = [
    "RUN_META_FILE",
    "RUNS_PREFIX",
    "RUN_PATTERN",
    "RunLocation",
    "from_run_folder",
    "from_runs_uri",
    "is_mlflow_run",
    "run_of_trial",
    "shown_uri",
    "store_uri",
]

RUNS_PREFIX = "runs:/"
#: ``runs:/<run_id>``: MLflow's run ids are 32 hex digits; other stores' ids are letters,
#: digits, ``-`` and ``_``.
RUN_PATTERN = re.compile(r"runs:/([A-Za-z0-9_-]{1,256})/?")
RUN_META_FILE = "meta.yaml"  # every run folder of a file store holds one
_TRACKING = "--mlflow-tracking-uri (mlflow_tracking_uri, or the MLFLOW_TRACKING_URI variable)"


@dataclass(frozen=True)
class RunLocation:
    """One run: the tracking store's URI as MLflow takes it, and the run's id."""

    tracking_uri: str
    run_id: str

    @property
    def shown(self) -> str:
        """The run for messages and logs: ``runs:/<id> in <store>``, without credentials."""
        return f"{RUNS_PREFIX}{self.run_id} in {shown_uri(self.tracking_uri)}"


def from_runs_uri(location: str, tracking_uri: str | None) -> RunLocation:
    """The run ``runs:/<run_id>`` names in the store ``tracking_uri``; a ConfigurationError
    when no store was given or the location is not of that form."""
    found = RUN_PATTERN.fullmatch(location.strip())
    if found is None:
        raise ConfigurationError(f"an MLflow run is given as runs:/<run_id>, got {location!r}")
    if not tracking_uri or not tracking_uri.strip():
        raise ConfigurationError(
            f"the trial {location} is an MLflow run: say which tracking store holds it with "
            f"{_TRACKING} (sqlite:///path/mlflow.db, http://host:port, or an mlruns folder)"
        )
    return RunLocation(store_uri(tracking_uri.strip()), found.group(1))


def from_run_folder(folder: str) -> RunLocation:
    """The run of a file store's run folder ``<mlruns>/<experiment_id>/<run_id>`` (a local
    path, or a ``file://`` URL)."""
    path = os.path.abspath(os.path.expanduser(folder.removeprefix("file://"))).rstrip(os.sep)
    run_id = os.path.basename(path)
    store = os.path.dirname(os.path.dirname(path))
    return RunLocation("file://" + store, run_id)


def is_mlflow_run(trial: str) -> bool:
    """Whether the trial location ``trial`` is an MLflow run: ``runs:/<run_id>``, or a local
    folder holding a file store run's ``meta.yaml``."""
    if RUN_PATTERN.fullmatch(trial.strip()):
        return True
    if "://" in trial and not trial.startswith("file://"):
        return False
    folder = os.path.expanduser(trial.removeprefix("file://"))
    return os.path.isfile(os.path.join(folder, RUN_META_FILE))


def run_of_trial(trial: str, tracking_uri: str | None) -> RunLocation | None:
    """The run the trial location ``trial`` is (its store ``tracking_uri`` for a
    ``runs:/<run_id>``), None for any other trial."""
    if not is_mlflow_run(trial):
        return None
    if RUN_PATTERN.fullmatch(trial.strip()):
        return from_runs_uri(trial, tracking_uri)
    return from_run_folder(trial)


def store_uri(uri: str) -> str:
    """A plain path (an mlruns folder) as the ``file://`` URI MLflow's client takes; any other
    URI as given."""
    if "://" in uri or uri.startswith(("databricks", "uc:")):
        return uri
    return "file://" + os.path.abspath(os.path.expanduser(uri))


def shown_uri(uri: str) -> str:
    """``uri`` without its user name and password (``http://u:p@host`` -> ``http://host``),
    and without its query (a token may sit there)."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return "a tracking URI that does not parse"
    if parts.username is None and parts.password is None and not parts.query:
        return uri
    netloc = (host or "") + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
