"""Trial key layout and the names parsed out of keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.errors import IndexReaderException, SMDebugValueError
from evaluator.formats.keys import (
    COLLECTIONS_PREFIX,
    END_OF_JOB_KEY,
    EVENTS_PREFIX,
    INDEX_PREFIX,
    collections_key,
    deserialize_tf_device,
    event_key,
    index_key,
    is_collections_key,
    is_index_key,
    parse_index_key,
    parse_reduction_tensor_name,
    reduction_tensor_name,
    serialize_tf_device,
    worker_from_collections_key,
)
from tests.unit.formats.fixture_files import DATA, INDEX_FILES

DEVICE = "/job:worker/replica:0/task:1/device:GPU:6"
SERIALIZED = "_job-worker_replica-0_task-1_device-GPU-6"


def test_constants() -> None:
    """The prefixes and the end-of-job marker are smdebug's."""
    assert (INDEX_PREFIX, EVENTS_PREFIX) == ("index/", "events/")
    assert COLLECTIONS_PREFIX == "collections/000000000/"
    assert END_OF_JOB_KEY == "training_job_end.ts"


def test_event_key_is_per_step() -> None:
    """Event files get one 12-digit folder per step."""
    assert event_key(1234, "worker_0") == "events/000000001234/000000001234_worker_0.tfevents"


@pytest.mark.parametrize(
    ("step", "key"),
    [
        (7, "index/000000000/000000000007_worker_0.json"),
        (999, "index/000000000/000000000999_worker_0.json"),
        (1234, "index/000000001/000000001234_worker_0.json"),
        (10**6, "index/000001000/000001000000_worker_0.json"),
    ],
)
def test_index_key_groups_by_thousand(step: int, key: str) -> None:
    """Index files are grouped per 1000 steps in 9-digit folders."""
    assert index_key(step, "worker_0") == key


def test_negative_steps_are_refused() -> None:
    """Steps are never negative."""
    with pytest.raises(ValueError):
        event_key(-1, "worker_0")
    with pytest.raises(ValueError):
        index_key(-1, "worker_0")


def test_collections_key() -> None:
    """Collections always live under collections/000000000/."""
    assert collections_key("worker_3") == "collections/000000000/worker_3_collections.json"


def test_tf_device_serialization_round_trip() -> None:
    """Device strings serialize with / -> _ and : -> -, and back."""
    assert serialize_tf_device(DEVICE) == SERIALIZED
    assert deserialize_tf_device(SERIALIZED) == DEVICE


def test_keys_serialize_tf_device_workers() -> None:
    """A device-string worker appears serialized in every file name (note the double underscore)."""
    assert index_key(499, DEVICE) == f"index/000000000/000000000499_{SERIALIZED}.json"
    assert event_key(499, DEVICE).endswith(f"000000000499_{SERIALIZED}.tfevents")
    assert collections_key(DEVICE) == f"collections/000000000/{SERIALIZED}_collections.json"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("index/000000000/000000000007_worker_0.json", True),
        ("index/000000000/000000000007_worker_0.csv", True),
        ("index/000000000/000000000007_worker_0.json.tmp", False),
        ("index/000000000/.json", False),
        ("index/000000000/notes.txt", False),
    ],
)
def test_is_index_key(key: str, expected: bool) -> None:
    """Index files end in .json or .csv (so .tmp files are skipped)."""
    assert is_index_key(key) is expected


@pytest.mark.parametrize(
    ("key", "step", "worker"),
    [
        ("index/000000000/000000000007_worker_0.json", 7, "worker_0"),
        ("index/000000001/000000001234_algo-1.json", 1234, "algo-1"),
        (f"index/000000000/000000000499_{SERIALIZED}.json", 499, DEVICE),
        ("events/000000000003/000000000003_worker_2.tfevents", 3, "worker_2"),
        ("/abs/trial/index/000000000/000000000002_worker_0.csv", 2, "worker_0"),
    ],
)
def test_parse_index_key(key: str, step: int, worker: str) -> None:
    """Step and worker come from the file name; TF device workers are deserialized."""
    assert parse_index_key(key) == (step, worker)


def test_double_underscore_in_trial_path_does_not_mangle_workers() -> None:
    """Deliberate fix: a "__" elsewhere in the path leaves plain worker names alone."""
    key = "s3_prefix/my__trial/index/000000000/000000000001_worker_0.json"
    assert parse_index_key(key) == (1, "worker_0")


def test_index_key_round_trip() -> None:
    """parse_index_key inverts index_key, device workers included."""
    for worker in ("worker_0", "algo-1", DEVICE):
        assert parse_index_key(index_key(4321, worker)) == (4321, worker)


@pytest.mark.parametrize(
    "key",
    [
        "index/000000000/worker_0.json",
        "000000000007_worker_0.json",
        "index/000000000/000000000007_worker_0.txt",
        "index/000000000/abc_worker_0.json",
    ],
)
def test_invalid_index_key(key: str) -> None:
    """Names that do not fit raise smdebug's IndexReaderException("Invalid File Found: ...")."""
    with pytest.raises(IndexReaderException) as info:
        parse_index_key(key)
    assert str(info.value) == f"Invalid File Found: {key}"


@pytest.mark.parametrize("path", INDEX_FILES[:40], ids=lambda p: p.name)
def test_fixture_index_keys_parse(path: Path) -> None:
    """Every fixture index file name parses to the step and worker the file holds."""
    key = str(path.relative_to(path.parents[2])).replace("\\", "/")
    step, worker = parse_index_key(key)
    assert index_key(step, worker) == key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("collections/000000000/worker_0_collections.json", True),
        ("collections/000000000/collections.json", True),
        ("collections/000000000/worker_0_collections.json.tmp", False),
        ("collections/000000000/worker_0.json", False),
    ],
)
def test_is_collections_key(key: str, expected: bool) -> None:
    """Collection files end in collections.json."""
    assert is_collections_key(key) is expected


@pytest.mark.parametrize(
    ("key", "worker"),
    [
        ("collections/000000000/worker_0_collections.json", "worker_0"),
        ("trial/collections/000000000/algo-1_collections.json", "algo-1"),
        (f"collections/000000000/{SERIALIZED}_collections.json", DEVICE),
        ("/x/collections/000000000/worker_1_collections.ts", "worker_1"),
    ],
)
def test_worker_from_collections_key(key: str, worker: str) -> None:
    """The worker is the file name before _collections; a leading _ means a TF device."""
    assert worker_from_collections_key(key) == worker


def test_fixture_collection_workers() -> None:
    """The multiworker fixture's collection files name workers 0 to 3."""
    folder = DATA / "multiworker" / "collections" / "000000000"
    keys = sorted(f"collections/000000000/{p.name}" for p in folder.iterdir())
    assert [worker_from_collections_key(k) for k in keys] == [f"worker_{i}" for i in range(4)]


@pytest.mark.parametrize("key", ["collections.json", "collections/000000000/worker_0.json"])
def test_bad_collections_key_is_a_clear_error(key: str) -> None:
    """A name that does not fit raises SMDebugValueError (smdebug: AttributeError)."""
    with pytest.raises(SMDebugValueError, match="collections file key"):
        worker_from_collections_key(key)


def test_reduction_tensor_names() -> None:
    """Saved reductions are named smdebug/reductions/[abs_]<red>/<name>, and parse back."""
    assert reduction_tensor_name("dense/kernel", "l2") == "smdebug/reductions/l2/dense/kernel"
    name = reduction_tensor_name("g/w", "mean", abs=True)
    assert name == "smdebug/reductions/abs_mean/g/w"
    assert parse_reduction_tensor_name(name) == ("g/w", "mean", True)
    assert parse_reduction_tensor_name("smdebug/reductions/max/x") == ("x", "max", False)
    assert parse_reduction_tensor_name("gradients/w") is None
    assert parse_reduction_tensor_name("smdebug/reductions/max") is None
