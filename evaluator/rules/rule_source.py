"""The user's rule code on disk: ``fetch_source`` gives a local file or folder for
``source_s3_uri`` (an S3 ``.py`` object or prefix is downloaded, every key checked to land
inside the copy), and ``source_folder`` the work folder it is downloaded into, removed when
done, with the folders of killed earlier attempts cleared (``evaluator.rules.loader`` then
imports the class from it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # not POSIX: stale folders without a lock file are still removed
    fcntl = None  # type: ignore[assignment]

from evaluator.errors import ConfigurationError, StorageError
from evaluator.storage import open_storage
from evaluator.storage.schemes import is_remote, local_path

__all__ = [
    "SOURCE_FOLDER_PREFIX",
    "fetch_source",
    "remove_stale_source_folders",
    "source_folder",
]

# ------------------------------------------------------------------------------ fetching


def fetch_source(source: str, *, workdir: Path) -> Path:
    """A local file or folder holding the user's rule code (downloaded from S3 if needed)."""
    if is_remote(source):
        return _download(source, workdir)
    path = Path(local_path(source))
    if not path.exists():
        raise ConfigurationError(
            f"rule source {source!r} (source_s3_uri) does not exist: give an s3:// URI, a "
            "file:// URL, or a path to a .py file or folder visible to the evaluator"
        )
    return path


def _download(uri: str, workdir: Path) -> Path:
    """Copy an S3 object or prefix into ``workdir``; the path of the copy.

    Every key must land inside the copy: a key with a ``..`` segment, an absolute one (``//``
    after the prefix) or one that would otherwise leave the folder is refused before anything
    is written. Zero-byte folder markers (keys ending in ``/``, as the S3 console makes) are
    skipped. A file the file system will not take (a name too long, no permission, a full
    disk) is a ``ConfigurationError`` naming the key and the reason.
    """
    # A .py object is read from its folder; a prefix is copied whole (helpers import).
    folder, _, name = uri.rpartition("/") if uri.endswith(".py") else (uri, "", "")
    target = workdir / "rule_source"

    async def copy() -> Path:
        storage = open_storage(folder + "/" if name else folder)
        try:
            if name:
                keys = [name]
            else:
                listed = [(o.key, o.size) async for o in storage.list_after("")]
                folders = {k.rpartition("/")[0] for k, _ in listed}
                keys = [k for k, size in listed if not _folder_marker(k, size, uri, folders)]
            if not keys:
                raise ConfigurationError(f"no files under rule source {uri} (source_s3_uri)")
            places = [(key, _inside(target, key, uri)) for key in keys]  # all checked first
            for key, dest in places:
                data = await storage.read(key)
                try:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                except OSError as e:
                    raise ConfigurationError(
                        f"cannot save rule source file {key!r} from {uri} (source_s3_uri): "
                        f"{e.strerror or e}"
                    ) from e
            return target / name if name else target
        finally:
            await storage.aclose()

    try:
        return asyncio.run(copy())
    except StorageError as e:
        raise ConfigurationError(f"cannot fetch rule source {uri} (source_s3_uri): {e}") from e


def _folder_marker(key: str, size: int, uri: str, folders: set[str]) -> bool:
    """True for an S3 console folder marker (``rules/``, zero bytes): nothing to copy. The
    prefix's own marker is listed as the empty key; a client that lists keys as paths (obstore)
    lists ``rules/`` as ``rules``, a zero-byte key that is the folder of other keys."""
    if not size and key in folders:
        return True
    if key and not key.endswith("/"):
        return False
    if size:
        raise ConfigurationError(
            f"rule source key {key!r} under {uri} (source_s3_uri) ends in '/' but holds "
            f"{size} bytes: a file name cannot end in '/'"
        )
    return True


def _inside(target: Path, key: str, uri: str) -> Path:
    """Where ``key`` is written under ``target``; a ``ConfigurationError`` when it would be
    anywhere else (``..`` segments, an absolute path, a name the platform cannot hold)."""
    refused = ConfigurationError(
        f"rule source key {key!r} under {uri} (source_s3_uri) is refused: it would be written "
        "outside the download folder (a '..' segment or an absolute path); rename the object"
    )
    parts = key.replace("\\", "/").split("/")
    if not key or key.startswith("/") or any(p == ".." for p in parts) or "\0" in key:
        raise refused
    base = os.path.normpath(os.path.abspath(target))
    dest = os.path.normpath(os.path.join(base, key))
    if os.path.isabs(key) or os.path.commonpath([base, dest]) != base or dest == base:
        raise refused
    return Path(dest)


# ------------------------------------------------------------------------------ the work folder

SOURCE_FOLDER_PREFIX = "rule-source-"
_LOCK_NAME = ".in-use"


@contextlib.contextmanager
def source_folder(scratch: str | None) -> Iterator[Path]:
    """A fresh ``rule-source-*`` folder under ``scratch`` (the system's temp folder if None)
    for downloaded rule code, removed when the block ends.

    While in use the folder holds a file locked by this process; the lock goes when the
    process does, however it ends. On entry, ``rule-source-*`` folders in ``scratch`` whose
    lock is free (left by a killed earlier attempt) are removed; nothing else is touched.
    """
    if scratch is not None:
        remove_stale_source_folders(Path(scratch))
    with tempfile.TemporaryDirectory(
        prefix=SOURCE_FOLDER_PREFIX, dir=scratch, ignore_cleanup_errors=True
    ) as folder:
        lock = _hold_lock(Path(folder) / _LOCK_NAME)
        try:
            yield Path(folder)
        finally:
            if lock is not None:
                lock.close()


def remove_stale_source_folders(scratch: Path) -> list[Path]:
    """Remove the ``rule-source-*`` folders in ``scratch`` no running process holds; the list
    of those removed. A folder without a lock file counts as stale only when it is older than
    this process (an earlier version's leftover)."""
    removed: list[Path] = []
    try:
        candidates = sorted(scratch.glob(SOURCE_FOLDER_PREFIX + "*"))
    except OSError:
        return removed
    for folder in candidates:
        if folder.is_symlink() or not folder.is_dir() or not _stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _stale(folder: Path) -> bool:
    lock_path = folder / _LOCK_NAME
    if not lock_path.exists():
        try:
            return folder.stat().st_mtime < _PROCESS_STARTED
        except OSError:
            return False
    if fcntl is None:
        return False  # no way to tell whether its process still runs
    try:
        with open(lock_path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False  # held: a running evaluator's folder
    return True


def _hold_lock(path: Path) -> IO[bytes] | None:
    if fcntl is None:
        return None
    try:
        handle = open(path, "wb")  # noqa: SIM115 - held open while the folder is in use
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


_PROCESS_STARTED = time.time()
