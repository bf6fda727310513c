"""One behaviour, three backends: every ``Storage`` passes the same contract."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from evaluator.errors import ObjectNotFound
from evaluator.storage import LocalStorage, MemoryStorage, S3Storage, Storage
from tests.support import collect, run_with

MakeStorage = Callable[[Mapping[str, bytes]], Storage]

# Keys chosen so that byte order differs from naive folder-by-folder order ("a-b" < "a/x"),
# with a non-ASCII key, an empty object and smdebug-shaped paths.
OBJECTS: dict[str, bytes] = {
    "a-b": b"dash",
    "a/x": b"slash",
    "a/y/z": b"deep",
    "a0": b"zero",
    "collections/000000000/worker_0_collections.json": b'{"collections": {}}',
    "empty": b"",
    "events/000000000001/000000000001_worker_0.tfevents": bytes(range(256)) * 4,
    "index/000000000/000000000001_worker_0.json": b'{"meta": 1}',
    "index/000000000/000000000002_worker_0.json": b'{"meta": 2}',
    "index/000000001/000000001000_worker_0.json": b'{"meta": 1000}',
    "index2/other": b"not under index/",
    "training_job_end.ts": b"",
    "u/z": b"ascii",
    "u/\u00e9": b"accent",
}
EVENTS = "events/000000000001/000000000001_worker_0.tfevents"


def _local(tmp_path: Path) -> MakeStorage:
    def make(objects: Mapping[str, bytes]) -> Storage:
        for key, data in objects.items():
            path = tmp_path.joinpath(*key.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return LocalStorage(tmp_path)

    return make


def _s3(request: pytest.FixtureRequest) -> MakeStorage:
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")

    def make(objects: Mapping[str, bytes]) -> Storage:
        # A neighbour trial whose keys share the root's prefix must stay invisible.
        server.put_objects(bucket, {"trial/run-1x/index/decoy": b"x"})
        server.put_objects(bucket, objects, prefix="trial/run-1/")
        return S3Storage(f"s3://{bucket}/trial/run-1/")

    return make


@pytest.fixture(params=["local", "memory", "s3"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStorage:
    """A factory that stores objects in the parametrized backend and returns that backend."""
    if request.param == "local":
        return _local(tmp_path)
    if request.param == "memory":
        return MemoryStorage
    return _s3(request)


@pytest.fixture
def storage(make_storage: MakeStorage) -> Storage:
    """The backend holding ``OBJECTS``."""
    return make_storage(OBJECTS)


def _keys(storage: Storage, prefix: str = "", start_after: str | None = None) -> list[str]:
    async def body(s: Storage) -> list[str]:
        return [info.key for info in await collect(s, prefix, start_after)]

    return run_with(storage, body)


def _expected(prefix: str = "", start_after: str | None = None) -> list[str]:
    keys = sorted(OBJECTS, key=lambda k: k.encode())
    return [k for k in keys if k.startswith(prefix) and (start_after is None or k > start_after)]


def test_lists_every_key_in_byte_order_with_sizes(storage: Storage) -> None:
    """Listing everything yields all keys in S3's byte order, each with its size."""

    async def body(s: Storage) -> list[tuple[str, int]]:
        return [(info.key, info.size) for info in await collect(s)]

    listed = run_with(storage, body)
    assert listed == [(key, len(OBJECTS[key])) for key in _expected()]


@pytest.mark.parametrize(
    "prefix",
    [
        "index/",
        "index",
        "index/000000000/",
        "index/000000000/0000000000",
        "a",
        "a/",
        "nothing/",
        "",
    ],
)
def test_lists_only_keys_beginning_with_the_prefix(storage: Storage, prefix: str) -> None:
    """The prefix is a plain string prefix, not a folder name."""
    assert _keys(storage, prefix) == _expected(prefix)


@pytest.mark.parametrize(
    "start_after",
    [
        "index/000000000/000000000001_worker_0.json",  # an existing key is itself excluded
        "index/000000000/000000000001_worker_0.jso",  # between keys
        "index/000000000/",  # a folder's own name
        "index/000000000/~",  # past a whole folder
        "a",  # before the prefix
        "index/~",  # after everything under the prefix
    ],
)
def test_start_after_is_exclusive_and_combines_with_the_prefix(
    storage: Storage, start_after: str
) -> None:
    """Only keys sorting strictly after ``start_after`` come back."""
    assert _keys(storage, "index/", start_after) == _expected("index/", start_after)


def test_start_after_across_folders_of_the_whole_root(storage: Storage) -> None:
    """Without a prefix, ``start_after`` skips earlier folders and keeps later ones."""
    assert _keys(storage, "", "a/x") == _expected("", "a/x")


def test_lists_more_than_one_page_in_order(make_storage: MakeStorage) -> None:
    """A listing longer than one S3 page (1000 keys) is complete, ordered and resumable."""
    objects = {f"index/{i // 1000:09d}/{i:012d}_worker_0.json": b"{}" for i in range(1203)}
    storage = make_storage(objects)

    async def body(s: Storage) -> tuple[list[str], list[str]]:
        everything = [info.key for info in await collect(s, "index/")]
        tail = [info.key for info in await collect(s, "index/", everything[999])]
        return everything, tail

    everything, tail = run_with(storage, body)
    assert everything == sorted(objects)
    assert tail == everything[1000:]


def test_read_returns_the_whole_object(storage: Storage) -> None:
    """``read`` returns exactly the stored bytes, empty objects included."""

    async def body(s: Storage) -> list[bytes]:
        return [await s.read(key) for key in OBJECTS]

    assert run_with(storage, body) == list(OBJECTS.values())


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (0, 1024),
        (0, 1),
        (5, 9),
        (1023, 1024),
        (1000, 5000),
        (1024, 1030),
        (2000, 3000),
        (7, 7),
        (1000, 1 << 40),
        (9, 3),
    ],
)
def test_read_range_is_half_open_and_clipped_at_the_end(
    storage: Storage, start: int, end: int
) -> None:
    """``read_range`` gives bytes ``[start, end)``, what exists past the end, nothing if empty."""

    async def body(s: Storage) -> bytes:
        return await s.read_range(EVENTS, start, end)

    assert run_with(storage, body) == OBJECTS[EVENTS][start:end]


def test_read_range_of_an_empty_object_is_empty(storage: Storage) -> None:
    """A range of a zero-byte object is empty, not an error."""

    async def body(s: Storage) -> bytes:
        return await s.read_range("empty", 0, 10)

    assert run_with(storage, body) == b""


def test_exists_only_for_exact_object_keys(storage: Storage) -> None:
    """``exists`` is true for an object's key, false for missing keys and folder names."""

    async def body(s: Storage) -> list[bool]:
        keys = [
            "training_job_end.ts",
            "empty",
            "index/000000000/000000000002_worker_0.json",
            "missing",
            "index",
            "index/",
        ]
        return [await s.exists(key) for key in keys]

    assert run_with(storage, body) == [True, True, True, False, False, False]


@pytest.mark.parametrize("operation", ["read", "read_range"])
def test_missing_objects_raise_object_not_found(storage: Storage, operation: str) -> None:
    """Reading a missing key raises ``ObjectNotFound`` naming that key."""

    async def body(s: Storage) -> bytes:
        if operation == "read":
            return await s.read("index/000000000/000000000099_worker_0.json")
        return await s.read_range("index/000000000/000000000099_worker_0.json", 0, 10)

    with pytest.raises(ObjectNotFound, match=r"000000000099_worker_0\.json"):
        run_with(storage, body)


def test_listing_an_empty_prefix_yields_nothing(storage: Storage) -> None:
    """A prefix with no objects lists nothing rather than failing."""
    assert _keys(storage, "events/000000000002/") == []


def test_aclose_is_idempotent(storage: Storage) -> None:
    """``aclose`` may be called again after use, and before any use."""

    async def body(s: Storage) -> bytes:
        await s.aclose()
        data = await s.read("a0")
        await s.aclose()
        await s.aclose()
        return data

    assert run_with(storage, body) == b"zero"


def test_is_a_storage(storage: Storage) -> None:
    """Each backend satisfies the ``Storage`` protocol and reports its root URI."""
    assert isinstance(storage, Storage)
    assert storage.uri
