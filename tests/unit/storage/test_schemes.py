"""Storage schemes in one place (``evaluator.storage.schemes``): a new scheme is one module
building its ``Scheme`` plus one ``register_scheme``, and every question about a location
(remote or local, well-formed, which bucket, which backend) is answered from the registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from evaluator.config.values import check_location as check_config_location
from evaluator.engine.options import TrialOptions
from evaluator.errors import ConfigurationError
from evaluator.formats.collections_file import Collection
from evaluator.sources.smdebug.parent import check_not_a_parent
from evaluator.storage import MemoryStorage, open_storage, schemes
from evaluator.storage.local import check_local_folder
from evaluator.storage.schemes import (
    check_location,
    is_remote,
    local_path,
    register_scheme,
    split_remote,
)
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from evaluator.trial.create import _storage_options
from tests.support.mem_scheme import BUCKETS, MEM_SCHEME, OPENED, registered


@pytest.fixture
def mem_scheme() -> Iterator[None]:
    """The ``mem://`` scheme, registered for one test only."""
    with registered():
        yield


def _memory_trial(folder: Path, steps: int = 3) -> MemoryStorage:
    writer = TrialWriter(folder)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    for step in range(steps):
        writer.write_step(step, {"loss": np.array([1.0 / (step + 1)], dtype=np.float32)})
    writer.end_training()
    files = [p for p in folder.rglob("*") if p.is_file()]
    return MemoryStorage({p.relative_to(folder).as_posix(): p.read_bytes() for p in files})


def test_s3_is_the_registered_remote_scheme() -> None:
    """Out of the box, ``s3://`` is remote and split into bucket and prefix; paths and
    ``file://`` URLs are local folders."""
    assert [s.prefix for s in schemes.registered_schemes()] == ["s3://"]
    assert is_remote("s3://bucket/a/b/") and split_remote("s3://bucket/a/b/") == ("bucket", "a/b/")
    assert split_remote("s3://bucket") == ("bucket", "")
    assert not is_remote("/tmp/trial") and not is_remote("file:///tmp/trial")
    assert local_path("file:///tmp/trial") == "/tmp/trial"
    with pytest.raises(ValueError, match="not a remote location"):
        split_remote("/tmp/trial")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("s3://", "must be s3://<bucket>/<prefix>, a folder or a file:// URI"),
        ("gs://bucket/x", r"\(unsupported scheme\)"),
        ("file://", "must name a folder after file://"),
    ],
)
def test_malformed_locations_name_the_forms_we_read(value: str, why: str) -> None:
    """A malformed location is a ``ConfigurationError`` naming the key and the forms read."""
    with pytest.raises(ConfigurationError, match=f"^base_trial {why}|^base_trial must"):
        check_location("base_trial", value)
    with pytest.raises(ConfigurationError, match=why):
        check_location("base_trial", value)


def test_a_registered_scheme_is_known_everywhere(mem_scheme: None, tmp_path: Path) -> None:
    """Once registered, a new scheme's URIs are remote, checked by its pattern (in the
    configuration's messages too), skipped by the local-folder checks, given the client
    deadlines, and opened through its ``opener``."""
    assert is_remote("mem://bucket/trial") and split_remote("mem://b/t/") == ("b", "t/")
    assert check_config_location("base_trial", "mem://bucket/trial") == "mem://bucket/trial"
    with pytest.raises(ConfigurationError, match="mem://<bucket>/<prefix>, a folder"):
        check_config_location("base_trial", "mem://Not A Bucket")
    check_local_folder("mem://bucket/missing", "base_trial")  # no local folder to miss
    check_not_a_parent("mem://bucket/missing", "base_trial")
    assert set(_storage_options("mem://bucket/t", TrialOptions())) == {
        "connect_timeout",
        "read_timeout",
        "request_deadline",
        "outage_tolerance",
    }
    BUCKETS["mem://bucket/trial"] = storage = _memory_trial(tmp_path / "trial")
    assert open_storage("mem://bucket/trial", read_timeout=5.0) is storage
    with create_trial("mem://bucket/trial", idle_scans_to_complete=1) as trial:
        assert trial.steps() == [0, 1, 2]
        assert trial.tensor("loss").value(2).tolist() == pytest.approx([1 / 3])
    assert [uri for uri, _ in OPENED] == ["mem://bucket/trial"] * 2
    assert "connect_timeout" in OPENED[1][1]


def test_an_unregistered_scheme_is_refused_by_open_storage() -> None:
    """Without its registration a scheme is unsupported, and the message lists the ones we
    read."""
    with pytest.raises(ConfigurationError, match=r"use s3://bucket/prefix, file:///path"):
        open_storage("mem://bucket/trial")


def test_s3_only_helpers_ask_the_registry(mem_scheme: None) -> None:
    """smdebug's ``is_s3`` takes another registered scheme's URI for what it is, not S3:
    ``(False, None, None)``."""
    from evaluator.compat.shim.smdebug.core.utils import is_s3

    assert is_s3("mem://bucket/a/b") == (False, None, None)
    assert is_s3("s3://bucket/a/b") == (True, "bucket", "a/b")


def test_batch_expands_a_prefix_of_any_registered_scheme(mem_scheme: None, tmp_path: Path) -> None:
    """``rule-evaluator batch mem://bucket/jobs/`` finds the trials among the prefix's
    sub-folders (one directly, one in SageMaker's ``debug-output/``, a ``rule-output`` skipped)
    through the scheme's storage alone, listing far fewer pages than the trials hold objects."""
    from container.batch.trials import Trial, find_trials

    objects: dict[str, bytes] = {"jobs/notes.txt": b"x", "jobs/c/rule-output/r.json": b"{}"}
    for job, inner in (("a", ""), ("b", "debug-output/")):
        trial = _memory_trial(tmp_path / job, steps=30)
        for key in trial._keys:
            objects[f"jobs/{job}/{inner}{key}"] = trial._get(key)
    BUCKETS["mem://bucket"] = store = MemoryStorage(objects, page_size=1)
    assert find_trials(["mem://bucket/jobs/"]) == [
        Trial("a", "mem://bucket/jobs/a"),
        Trial("b", "mem://bucket/jobs/b/debug-output"),
    ]
    assert 0 < store.calls["list"] < len(objects) / 5
    assert store.calls["read"] == 0
    with pytest.raises(ConfigurationError, match=r"^mem://bucket/jobs/c is not a trial"):
        find_trials(["mem://bucket/jobs/c"])
    with pytest.raises(ConfigurationError, match=r"^cannot list mem://other/jobs: mem://other "):
        find_trials(["mem://other/jobs"])


def test_a_scheme_with_its_own_folder_lister_is_listed_by_it(mem_scheme: None) -> None:
    """A scheme's ``folders`` factory is asked once per ``Folders`` and its lister answers every
    location of that scheme; local folders keep ``scandir``."""
    from dataclasses import replace

    from evaluator.storage.folders import Folders

    made: list[str] = []

    class Listed:
        def children(self, location: str) -> tuple[set[str], set[str]]:
            made.append(location)
            return {"index"}, set()

    def factory() -> Listed:
        made.append("made")
        return Listed()

    register_scheme(replace(MEM_SCHEME, folders=factory))
    folders = Folders()
    assert folders.children("mem://b/x") == ({"index"}, set())
    assert folders.children("mem://b/y") == ({"index"}, set())
    assert made == ["made", "mem://b/x", "mem://b/y"]
    with pytest.raises(ConfigurationError, match="the trial folder /no/such/place does not exist"):
        folders.children("/no/such/place")


@pytest.mark.parametrize(
    ("value", "part"),
    [
        ("s3://b/jobs/..", "a '..' part"),
        ("s3://b/jobs/../x/", "a '..' part"),
        ("s3://b/./jobs", "a '.' part"),
        ("s3://b//jobs", "an empty part"),
        ("s3://b/jobs//x", "an empty part"),
    ],
)
def test_a_key_prefix_with_dot_parts_is_refused(value: str, part: str) -> None:
    """Object keys are not paths: a prefix with '.', '..' or '//' is a ClientError naming the
    location and the part, never a ValueError from the client at the first request."""
    with pytest.raises(ConfigurationError, match=f"has {part}") as caught:
        check_location("base_trial", value)
    assert value in str(caught.value)
    for fine in ("s3://b", "s3://b/", "s3://b/jobs/", "s3://b/jobs/.x/..y/a.b"):
        assert check_location("base_trial", fine) == fine
