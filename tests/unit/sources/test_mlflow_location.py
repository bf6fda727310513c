"""MLflow runs' locations and histories without MLflow (evaluator.sources.mlflow.location and
client's pure parts): runs:/ URIs and run folders, stores named without credentials, the last
value of a step winning, +/-1.797e308 read as infinities."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.sources.mlflow.client import history_from_arrays
from evaluator.sources.mlflow.location import (
    from_run_folder,
    from_runs_uri,
    is_mlflow_run,
    run_of_trial,
    shown_uri,
)


def test_a_runs_uri_names_its_run_in_the_store_given() -> None:
    """runs:/<id> (a trailing / allowed) with a store; a plain folder store becomes file://."""
    run = from_runs_uri("runs:/abc123/", "sqlite:///mlflow.db")
    assert (run.tracking_uri, run.run_id) == ("sqlite:///mlflow.db", "abc123")
    assert from_runs_uri("runs:/abc", "/data/mlruns").tracking_uri == "file:///data/mlruns"


def test_a_runs_uri_without_a_store_says_how_to_give_one() -> None:
    """No tracking URI: a ConfigurationError naming --mlflow-tracking-uri and the variable."""
    with pytest.raises(ConfigurationError, match="--mlflow-tracking-uri.*MLFLOW_TRACKING_URI"):
        from_runs_uri("runs:/abc", None)
    with pytest.raises(ConfigurationError, match="runs:/<run_id>"):
        from_runs_uri("runs:/a/b/c", "sqlite:///x.db")


def test_a_run_folder_is_its_store_two_levels_up(tmp_path: Path) -> None:
    """mlruns/<experiment>/<run> is run <run> of the file store mlruns; the meta.yaml at its
    root shows it is a run."""
    folder = tmp_path / "mlruns" / "0" / "f00d"
    folder.mkdir(parents=True)
    assert not is_mlflow_run(str(folder))
    (folder / "meta.yaml").write_text("run_id: f00d\n")
    assert is_mlflow_run(str(folder)) and is_mlflow_run(f"file://{folder}")
    run = run_of_trial(str(folder), None)
    assert run is not None and run.run_id == "f00d"
    assert run.tracking_uri == f"file://{tmp_path / 'mlruns'}"
    assert from_run_folder(str(folder) + "/").run_id == "f00d"
    assert run_of_trial(str(tmp_path), None) is None and not is_mlflow_run("s3://b/run")


def test_a_store_is_shown_without_credentials() -> None:
    """User name, password and query leave; a URI without them is shown as it is."""
    assert shown_uri("https://bob:pw@mlflow.example.com:8443/x?token=t") == (
        "https://mlflow.example.com:8443/x"
    )
    assert shown_uri("sqlite:///mlflow.db") == "sqlite:///mlflow.db"
    assert "pw" not in from_runs_uri("runs:/a", "http://bob:pw@h:5000").shown


def test_a_history_keeps_the_last_value_of_a_step_and_reads_infinities() -> None:
    """Sorted by step; at a repeated step the later timestamp (then the later row) wins;
    +/-max double read as +/-inf, NaN kept; negative steps left out."""
    big = sys.float_info.max
    steps = np.array([2, 0, 2, 1, -1, 3, 3])
    stamps = np.array([5, 1, 9, 2, 0, 4, 4])
    values = np.array([1.0, big, 7.0, -big, 3.0, math.nan, 8.0])
    history = history_from_arrays(steps, stamps, values)
    assert history.steps.tolist() == [0, 1, 2, 3]
    assert history.values.tolist() == [math.inf, -math.inf, 7.0, 8.0]
