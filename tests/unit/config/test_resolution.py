"""Base-trial resolution order (container-protocol §1.8), with a temporary /opt/ml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluator.config import EvaluatorConfig, load_config
from evaluator.errors import ConfigurationError

MIRROR = "processing/input/tensors"


def _load(
    root: Path, env: dict[str, str] | None = None, processing: dict[str, Any] | None = None
) -> EvaluatorConfig:
    if processing is not None:
        path = root / "config" / "processingjobconfig.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(processing))
    return load_config(
        [], {"rule_to_invoke": "A", **(env or {})}, opt_ml_root=root, stdout_is_tty=False
    )


def _inputs(
    uri: str, local: str = "/opt/ml/processing/input/tensors", name: str = "input-1"
) -> dict[str, Any]:
    return {
        "ProcessingInputs": [
            {"InputName": "code", "S3Input": {"S3Uri": "s3://b/code", "LocalPath": "/opt/ml/code"}},
            {"InputName": name, "S3Input": {"S3Uri": uri, "LocalPath": local}},
        ]
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "opt_ml"


def test_base_trial_comes_first(root: Path) -> None:
    """base_trial wins over S3_PATH and the processing input."""
    config = _load(
        root,
        {"base_trial": "s3://b/job/debug-output", "S3_PATH": "s3://b/other"},
        _inputs("s3://b/input"),
    )
    assert (config.base_trial, config.trial_source) == ("s3://b/job/debug-output", "base_trial")


def test_s3_path_comes_second(root: Path) -> None:
    """S3_PATH is used when base_trial is not given."""
    config = _load(root, {"S3_PATH": "s3://b/profiler"}, _inputs("s3://b/input"))
    assert (config.base_trial, config.trial_source) == ("s3://b/profiler", "S3_PATH")


def test_processing_input_s3_uri_beats_its_local_copy(root: Path) -> None:
    """The tensors input's S3 URI is preferred to the StartOfJob snapshot at its LocalPath."""
    (root / MIRROR).mkdir(parents=True)
    config = _load(root, processing=_inputs("s3://b/job/debug-output"))
    assert config.base_trial == "s3://b/job/debug-output"
    assert config.trial_source == "processing input 'input-1'"
    assert config.wait_for_training_end


def test_processing_input_found_by_name(root: Path) -> None:
    """An input named tensors (or base_trial) counts whatever its LocalPath."""
    config = _load(
        root, processing=_inputs("s3://b/t", local="/opt/ml/processing/x", name="tensors")
    )
    assert config.base_trial == "s3://b/t"


def test_local_copy_when_input_is_not_on_s3(root: Path) -> None:
    """SDK local mode gives a file:// source: the mounted copy is read instead."""
    (root / MIRROR).mkdir(parents=True)
    config = _load(root, processing=_inputs("file:///home/me/debug-output"))
    assert config.base_trial == str(root / MIRROR)
    assert not config.wait_for_training_end


def test_local_folder_without_processing_config(root: Path) -> None:
    """A mounted /opt/ml/processing/input/tensors is used when nothing else names a trial."""
    (root / MIRROR).mkdir(parents=True)
    config = _load(root)
    assert (config.base_trial, config.trial_source) == (
        str(root / MIRROR),
        f"folder {root / MIRROR}",
    )


def test_nothing_found_names_every_place(root: Path) -> None:
    """The error lists every place looked at, so the user knows what to set."""
    with pytest.raises(ConfigurationError) as info:
        _load(root, processing={"ProcessingInputs": []})
    message = str(info.value)
    for place in (
        "base_trial",
        "--trial-dir",
        "S3_PATH",
        "processingjobconfig.json",
        str(root / MIRROR),
    ):
        assert place in message


def test_file_uri_and_s3_uri_are_accepted(root: Path) -> None:
    """file:// URIs and s3:// URIs are kept as given."""
    assert _load(root, {"base_trial": "file:///data/t"}).base_trial == "file:///data/t"
    assert _load(root, {"BASE_TRIAL": "s3://b/p/"}).base_trial == "s3://b/p/"
