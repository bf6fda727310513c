"""Local-folder backend: pruned listing, hidden temporaries, consistent reads, clear errors."""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluator.errors import AccessDenied, ObjectNotFound
from evaluator.storage import LocalStorage, open_storage
from tests.support import collect, run, run_with


def _write(root: Path, files: dict[str, bytes]) -> None:
    for key, data in files.items():
        path = root.joinpath(*key.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _keys(storage: LocalStorage, prefix: str = "", start_after: str | None = None) -> list[str]:
    return [info.key for info in run(collect(storage, prefix, start_after))]


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records every folder the backend scans."""
    folders: list[str] = []
    real_scandir = os.scandir

    def spy(path: str) -> object:
        folders.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    yield folders


def test_listing_after_a_key_scans_only_the_groups_that_can_hold_later_keys(
    tmp_path: Path, scanned: list[str]
) -> None:
    """Listing ``index/`` after a key in group 49 scans ``index`` and groups 49 and later only."""
    _write(tmp_path, {f"index/{g:09d}/{g * 1000:012d}_worker_0.json": b"{}" for g in range(51)})
    storage = LocalStorage(tmp_path)
    keys = _keys(storage, "index/", "index/000000049/000000049000_worker_0.json")
    assert keys == ["index/000000050/000000050000_worker_0.json"]
    groups = sorted(os.path.relpath(f, tmp_path) for f in scanned)
    assert groups == ["index", "index/000000049", "index/000000050"]


def test_listing_events_prunes_one_folder_per_step(tmp_path: Path, scanned: list[str]) -> None:
    """Step folders of ``events/`` that sort before ``start_after`` are never opened."""
    _write(tmp_path, {f"events/{s:012d}/{s:012d}_worker_0.tfevents": b"x" for s in range(30)})
    keys = _keys(
        LocalStorage(tmp_path), "events/", "events/000000000027/000000000027_worker_0.tfevents"
    )
    assert keys == [f"events/{s:012d}/{s:012d}_worker_0.tfevents" for s in (28, 29)]
    assert len(scanned) == 1 + 3  # events/ itself, then steps 27, 28 and 29


def test_listing_starts_in_the_folder_the_prefix_names(tmp_path: Path, scanned: list[str]) -> None:
    """A prefix naming a deep folder scans from that folder, not from the root."""
    _write(
        tmp_path,
        {"collections/000000000/worker_0_collections.json": b"{}", "index/000000000/x.json": b"{}"},
    )
    assert _keys(LocalStorage(tmp_path), "collections/000000000/") == [
        "collections/000000000/worker_0_collections.json"
    ]
    assert [os.path.relpath(f, tmp_path) for f in scanned] == ["collections/000000000"]


_NAMES = st.sampled_from(["a", "a-b", "a0", "b", "ab", "a.b", "\u00e9", "z"])


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(st.lists(_NAMES, min_size=1, max_size=3).map("/".join), min_size=1, max_size=15),
    prefix=st.lists(_NAMES, max_size=2).map("/".join) | st.sampled_from(["", "a/", "a", "a-"]),
    start_after=st.none() | st.lists(_NAMES, min_size=1, max_size=3).map("/".join),
)
def test_listing_equals_sorting_and_filtering_every_key(
    keys: set[str], prefix: str, start_after: str | None
) -> None:
    """For any tree, the pruned walk yields what sorting and filtering all keys would."""
    # A key that is also a folder of another key cannot exist on disk: drop such keys.
    files = {k for k in keys if not any(other.startswith(k + "/") for other in keys)}
    with tempfile.TemporaryDirectory() as root:
        _write(Path(root), {key: b"x" for key in files})
        listed = _keys(LocalStorage(root), prefix, start_after)
    expected = sorted(
        (k for k in files if k.startswith(prefix) and (start_after is None or k > start_after)),
        key=lambda k: k.encode(),
    )
    assert listed == expected


def test_temporary_files_are_never_listed(tmp_path: Path) -> None:
    """smdebug's ``*.tmp`` files, still being written, stay out of listings."""
    _write(
        tmp_path,
        {
            "index/000000000/000000000001_worker_0.json": b"{}",
            "index/000000000/000000000002_worker_0.json.tmp": b"{",
        },
    )
    assert _keys(LocalStorage(tmp_path), "index/") == ["index/000000000/000000000001_worker_0.json"]


@pytest.mark.parametrize("inline_read_limit", [1 << 20, 0], ids=["inline", "thread"])
def test_a_file_replaced_by_rename_is_read_whole_never_mixed(
    tmp_path: Path, inline_read_limit: int
) -> None:
    """While a writer renames new versions over a file, every read sees exactly one version."""
    size = 64 * 1024
    versions = [bytes([v]) * size for v in (1, 2)]
    target = tmp_path / "events.tfevents"
    target.write_bytes(versions[0])
    stop = threading.Event()

    def writer() -> None:
        for i in range(2000):  # bounded even if the reader fails early
            if stop.is_set():
                return
            scratch = tmp_path / f"events.tfevents.{i}.tmp"
            scratch.write_bytes(versions[i % 2])
            os.replace(scratch, target)

    async def reader(storage: LocalStorage) -> list[bytes]:
        results = []
        for _ in range(100):
            results.append(await storage.read("events.tfevents"))
            results.append(await storage.read_range("events.tfevents", 1000, size - 1000))
            await asyncio.sleep(0.001)  # let the writer thread take the GIL
        return results

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        results = run_with(LocalStorage(tmp_path, inline_read_limit=inline_read_limit), reader)
    finally:
        stop.set()
        thread.join(timeout=30)
    for data in results:
        assert len(set(data)) == 1 and len(data) in (size, size - 2000)
    assert {data[0] for data in results} == {1, 2}, "the writer never overlapped the reader"


def test_large_reads_go_to_a_thread_and_small_ones_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads above ``inline_read_limit`` run in a worker thread; smaller ones run inline."""
    _write(tmp_path, {"small": b"s" * 10, "large": b"l" * 100})
    threaded: list[object] = []
    real_to_thread = asyncio.to_thread

    async def spy(function: object, *args: object) -> object:
        threaded.append(args[0])
        return await real_to_thread(function, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "to_thread", spy)

    async def body(s: LocalStorage) -> list[bytes]:
        return [
            await s.read("small"),
            await s.read("large"),
            await s.read_range("large", 0, 50),
            await s.read_range("large", 0, 5),
        ]

    results = run_with(LocalStorage(tmp_path, inline_read_limit=20), body)
    assert results == [b"s" * 10, b"l" * 100, b"l" * 50, b"l" * 5]
    assert [os.path.basename(str(p)) for p in threaded] == ["large", "large"]


def test_home_and_file_scheme_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/trial`` and ``file:///abs/trial`` both name the folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / "trial", {"training_job_end.ts": b""})
    for uri in ("~/trial", f"file://{tmp_path}/trial", str(tmp_path / "trial")):
        storage = open_storage(uri)
        assert isinstance(storage, LocalStorage) and storage.uri == uri
        assert run_with(storage, lambda s: s.exists("training_job_end.ts"))


def test_a_missing_root_lists_nothing_and_reads_raise_not_found(tmp_path: Path) -> None:
    """A trial folder not created yet looks empty, like an S3 prefix with no objects."""
    storage = LocalStorage(tmp_path / "not-yet")
    assert _keys(storage) == []
    with pytest.raises(ObjectNotFound, match="not-yet"):
        run(storage.read("index/000000000/000000000000_worker_0.json"))


@pytest.mark.parametrize("key", ["../outside", "/etc/hostname", "a//b", "a/./b", "a/", ""])
def test_keys_that_would_leave_the_root_are_not_found(tmp_path: Path, key: str) -> None:
    """Keys with empty, ``.`` or ``..`` parts never reach the file system."""
    (tmp_path.parent / "outside").write_bytes(b"secret")
    storage = LocalStorage(tmp_path)
    with pytest.raises(ObjectNotFound):
        run(storage.read(key))
    assert run(storage.exists(key)) is False
    assert _keys(storage, "../") == []


def test_a_folder_is_not_an_object(tmp_path: Path) -> None:
    """Reading a folder's key raises ``ObjectNotFound``."""
    _write(tmp_path, {"index/000000000/x.json": b"{}"})
    with pytest.raises(ObjectNotFound):
        run(LocalStorage(tmp_path).read("index/000000000"))


def test_permission_errors_become_access_denied_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file or folder the user may not read raises ``AccessDenied`` naming its path."""
    _write(tmp_path, {"index/000000000/x.json": b"{}"})

    def refuse(path: object, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr(os, "scandir", refuse)
    storage = LocalStorage(tmp_path)
    with pytest.raises(
        AccessDenied, match=str(tmp_path / "index" / "000000000" / "x.json")
    ) as read_error:
        run(storage.read("index/000000000/x.json"))
    assert isinstance(read_error.value.__cause__, PermissionError)
    with pytest.raises(AccessDenied, match=str(tmp_path / "index")):
        run(collect(storage, "index/"))
