"""``open_storage`` picks the backend from the trial location; the public names are pinned."""

from __future__ import annotations

import pytest

import evaluator.storage
from evaluator.errors import ConfigurationError, StorageError
from evaluator.storage import LocalStorage, S3Storage, open_storage


def test_public_names_are_pinned() -> None:
    """The package exports exactly these names, sorted."""
    assert evaluator.storage.__all__ == [
        "LocalStorage",
        "MemoryStorage",
        "ObjectInfo",
        "S3Storage",
        "Storage",
        "open_storage",
    ]


@pytest.mark.parametrize("uri", ["s3://bucket/prefix", "s3://bucket", "s3://bucket/a/b/"])
def test_s3_uris_open_s3_storage_without_touching_the_network(uri: str) -> None:
    """``s3://`` opens ``S3Storage`` and keeps the URI as given; no client exists yet."""
    storage = open_storage(uri, max_attempts=3)
    assert isinstance(storage, S3Storage) and storage.uri == uri


@pytest.mark.parametrize("uri", ["/tmp/trial", "relative/trial", "~/trial", "file:///tmp/trial"])
def test_paths_and_file_uris_open_local_storage(uri: str) -> None:
    """Plain paths and ``file://`` URIs open ``LocalStorage``."""
    storage = open_storage(uri)
    assert isinstance(storage, LocalStorage) and storage.uri == uri


def test_unknown_schemes_are_a_configuration_error() -> None:
    """A scheme we cannot read says which ones we can."""
    with pytest.raises(ConfigurationError, match="s3://bucket/prefix"):
        open_storage("gs://bucket/trial")


def test_an_s3_uri_without_a_bucket_is_rejected() -> None:
    """``s3://`` alone names no bucket."""
    with pytest.raises(StorageError, match="no bucket"):
        open_storage("s3:///prefix")
