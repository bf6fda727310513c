"""MLflow runs as an input format: a run's metric histories read through MLflow's own client,
as smdebug-style steps, modes and tensors (docs/mlflow.md).

A run is given as ``runs:/<run_id>`` (its tracking store: the ``mlflow_tracking_uri`` trial
option, ``--mlflow-tracking-uri`` or ``MLFLOW_TRACKING_URI``), which no storage holds, or as a
legacy file store's run folder, ``mlruns/<experiment_id>/<run_id>`` (detected by the
``meta.yaml`` at its root). ``location`` reads either spelling, ``client`` is the door to
MLflow's client, ``source`` maps the run (``MlflowSource``). MLflow's client is imported only
when a run is read: the extra ``rule-evaluator[mlflow]`` installs it.
"""

from __future__ import annotations

from evaluator.engine.options import TrialOptions
from evaluator.errors import ConfigurationError
from evaluator.sources.mlflow.location import (
    RUN_META_FILE,
    RUN_PATTERN,
    RUNS_PREFIX,
    from_run_folder,
    from_runs_uri,
)
from evaluator.sources.mlflow.source import MlflowSource
from evaluator.sources.registry import LocationForm, SourceFormat
from evaluator.storage.base import Storage
from evaluator.storage.schemes import is_remote

__all__ = ["FORMAT", "MlflowSource"]


def is_run_folder_key(key: str) -> bool:
    """Whether a listed key shows a file store's run folder (its ``meta.yaml``, at the root)."""
    return key == RUN_META_FILE


def _make(storage: Storage, options: TrialOptions) -> MlflowSource:
    if is_remote(storage.uri):
        raise ConfigurationError(
            f"{storage.uri} looks like an MLflow run folder, but MLflow reads a file store from "
            "a local folder only: copy the mlruns folder here, or give the run as runs:/<run_id> "
            "with its tracking server (--mlflow-tracking-uri)"
        )
    return MlflowSource(from_run_folder(storage.uri), options, storage=storage)


def _open(location: str, options: TrialOptions) -> MlflowSource:
    store = options.mlflow_tracking_uri
    return MlflowSource(
        from_runs_uri(location, None if store is None else store.get_secret_value()), options
    )


FORMAT = SourceFormat(
    "mlflow",
    is_run_folder_key,
    _make,
    LocationForm(RUNS_PREFIX, "runs:/<run_id>", RUN_PATTERN, _open),
)
