"""Local-folder storage: keys are paths below a root folder.

Two choices here come from measurements:

* Small reads run as plain blocking calls inside the coroutine. Reading a few-KB file from the
  page cache costs tens of microseconds, less than one hop to a worker thread (2000 index files:
  about 50 ms inline against about 200 ms through ``asyncio.to_thread``); the trial cache reads
  thousands of them at startup. Reads larger than ``inline_read_limit`` go to a thread, so a big
  event file cannot stall the event loop.
* Listing walks folders in S3 byte order and skips whole subfolders that sort entirely before
  ``start_after``: a poll that lists ``index/`` after its last key scans only the newest group
  folder, not the whole trial.

Every read uses one file descriptor from open to last byte, so a file replaced by rename while
it is read yields either the old or the new content, never a mix.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import AsyncIterator, Iterator

from evaluator.errors import AccessDenied, ConfigurationError, ObjectNotFound, StorageError
from evaluator.storage.base import ObjectInfo
from evaluator.storage.schemes import is_remote, local_path

__all__ = ["LocalFolders", "LocalStorage", "check_local_folder"]

_TEMPORARY_SUFFIX = ".tmp"  # smdebug writes <name>.tmp and renames it when complete
_CHUNK = 8 << 20
_ONE_READ = 1 << 30  # a range up to this size is read with one pread


class LocalStorage:
    """A ``Storage`` over a folder (``~`` expanded, ``file://`` accepted)."""

    def __init__(self, root: str | os.PathLike[str], *, inline_read_limit: int = 1 << 20) -> None:
        self._uri = os.fspath(root)
        folder = self._uri.removeprefix("file://")
        self._root = os.path.abspath(os.path.expanduser(folder))
        self._inline_read_limit = inline_read_limit

    @property
    def uri(self) -> str:
        return self._uri

    async def list_after(
        self, prefix: str, start_after: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        # Start in the deepest folder the prefix names: "index/000000001/0000" -> index/000000001.
        folder_key = prefix.rpartition("/")[0]
        folder = self._path_or_none(folder_key) if folder_key else self._root
        if folder is None:
            return
        base = f"{folder_key}/" if folder_key else ""
        for info in self._walk(folder, base, prefix, start_after or ""):
            yield info

    def _walk(self, folder: str, base: str, prefix: str, start: str) -> Iterator[ObjectInfo]:
        """Objects below ``folder`` (whose keys begin with ``base``) in byte order."""
        for name, path, is_dir in self._sorted_entries(folder):
            key = base + name
            if is_dir:
                below = key + "/"
                if _may_hold(below, prefix, start):
                    yield from self._walk(path, below, prefix, start)
            elif key > start and key.startswith(prefix) and not name.endswith(_TEMPORARY_SUFFIX):
                size = _size_or_none(path)
                if size is not None:  # renamed away since the folder was read
                    yield ObjectInfo(key, size)

    def _sorted_entries(self, folder: str) -> list[tuple[str, str, bool]]:
        """(name, path, is_dir) sorted so that keys come out in S3's byte order."""
        try:
            with os.scandir(folder) as entries:
                found = [(e.name, e.path, e.is_dir()) for e in entries]
        except OSError as error:
            translated = _translated(error, folder)
            if isinstance(translated, ObjectNotFound):
                return []  # no such folder (yet): nothing to list, as for an empty S3 prefix
            raise translated from error
        # A folder's keys all begin with "name/", so it sorts as "name/", not "name": in bytes,
        # "a-b" < "a/x" although "a" < "a-b". UTF-8 byte order equals code-point order.
        found.sort(key=lambda entry: entry[0] + "/" if entry[2] else entry[0])
        return found

    async def read(self, key: str) -> bytes:
        path = self._path(key)
        try:
            fd = _open_regular(path)
            try:
                size = os.fstat(fd).st_size
                if size <= self._inline_read_limit:
                    return _read_small(fd, size)
            finally:
                os.close(fd)
        except OSError as error:
            raise _translated(error, path) from error
        return await self._in_thread(path, 0, None)

    async def read_range(self, key: str, start: int, end: int) -> bytes:
        if end - start > self._inline_read_limit:
            self._check_range(key, start)
            return await self._in_thread(self._path(key), start, end)
        return self.read_range_sync(key, start, end)

    def read_range_sync(self, key: str, start: int, end: int) -> bytes:
        """``read_range`` in the calling thread (``SyncRangeReader``): a blocking local read."""
        self._check_range(key, start)
        if start >= end:
            return b""
        path = self._path(key)
        try:
            return _read_file(path, start, end)
        except OSError as error:
            raise _translated(error, path) from error

    @staticmethod
    def _check_range(key: str, start: int) -> None:
        if start < 0:
            raise ValueError(f"negative start {start} reading {key!r}")

    async def exists(self, key: str) -> bool:
        path = self._path_or_none(key)
        return path is not None and os.path.isfile(path)

    async def aclose(self) -> None:
        return None

    async def _in_thread(self, path: str, start: int, end: int | None) -> bytes:
        # The thread opens and closes its own descriptor: if this task is cancelled the thread
        # finishes alone, and no descriptor is closed under it and reused by someone else.
        try:
            return await asyncio.to_thread(_read_file, path, start, end)
        except OSError as error:
            raise _translated(error, path) from error

    def _path(self, key: str) -> str:
        path = self._path_or_none(key)
        if path is None:
            raise ObjectNotFound(f"{key!r} is not a valid key below {self._root}", uri=self._root)
        return path

    def _path_or_none(self, key: str) -> str | None:
        """The file path for ``key``, or None for a key that would leave the root."""
        parts = key.split("/")
        if "" in parts or "." in parts or ".." in parts:
            return None
        # Plain concatenation: os.path.join costs more than the read itself on the hot path.
        return f"{self._root}/{key}" if os.sep == "/" else os.path.join(self._root, *parts)


def check_local_folder(location: str, key: str) -> None:
    """A local trial that does not exist is a typo or a missing mount, not a job still
    starting: say so at once (``ConfigurationError``, naming ``key``). S3 URIs pass."""
    if is_remote(location):
        return
    path = local_path(location)
    if not os.path.isdir(path):
        what = "is not a folder" if os.path.exists(path) else "does not exist"
        raise ConfigurationError(
            f"the trial folder {location} ({key}) {what}: give the folder holding the "
            "training job's debug output (collections/, index/, events/), or an s3:// URI; "
            "with docker run, check the -v mount"
        )


class LocalFolders:
    """The ``FolderLister`` of local folders (paths and ``file://`` URLs)."""

    def children(self, location: str) -> tuple[set[str], set[str]]:
        path = local_path(location)
        try:
            entries = list(os.scandir(path))
        except FileNotFoundError:
            raise ConfigurationError(f"the trial folder {location} does not exist") from None
        except NotADirectoryError:
            raise ConfigurationError(f"{location} is a file, not a trial folder") from None
        except OSError as e:
            raise ConfigurationError(f"cannot read the folder {location}: {e.strerror}") from None
        folders = {e.name for e in entries if e.is_dir()}
        return folders, {e.name for e in entries if not e.is_dir()}


def _translated(error: OSError, path: str) -> StorageError:
    """The storage error for an ``OSError`` on ``path`` (the caller sets ``__cause__``)."""
    if isinstance(error, (FileNotFoundError, NotADirectoryError, IsADirectoryError)):
        return ObjectNotFound(f"{path} does not exist", uri=path)
    if isinstance(error, PermissionError):
        return AccessDenied(
            f"permission denied reading {path}: the evaluator's user needs read access "
            "to the trial folder and its files",
            uri=path,
        )
    return StorageError(f"cannot read {path}: {error.strerror or error}", uri=path)


def _may_hold(folder_key: str, prefix: str, start: str) -> bool:
    """Whether keys beginning with ``folder_key`` can match ``prefix`` and sort after ``start``."""
    if not (folder_key.startswith(prefix) or prefix.startswith(folder_key)):
        return False
    # Every key below sorts before ``start`` exactly when start is greater and does not lie
    # inside the folder itself.
    return not (start > folder_key and not start.startswith(folder_key))


def _size_or_none(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _open_regular(path: str) -> int:
    """A descriptor of the regular file ``path``. A FIFO, device or socket in the trial folder
    is refused without blocking (``O_NONBLOCK``, then ``fstat``): a run must never hang on
    one."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):  # a folder is no object, as on S3
        raise IsADirectoryError(errno.EISDIR, "is a folder", path)
    raise _NotAFile(path)


class _NotAFile(OSError):
    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not a regular file (a FIFO, device or socket)")
        self.strerror = "not a regular file (a FIFO, device or socket)"


def _read_file(path: str, start: int, end: int | None) -> bytes:
    fd = _open_regular(path)
    try:
        return _read_all(fd) if end is None else _pread(fd, start, end)
    finally:
        os.close(fd)


def _read_small(fd: int, size: int) -> bytes:
    """The whole of a small open file of ``size`` bytes (as ``fstat`` said): one ``read``
    (a file object per index file costs as much as the read); a file that grew since is read
    to its end."""
    data = os.read(fd, size + 1)
    if len(data) <= size:  # a regular file's short read is its end
        return data
    return data + _read_all(fd)


def _read_all(fd: int) -> bytes:
    with open(fd, "rb", buffering=0, closefd=False) as file:
        return file.readall()


def _pread(fd: int, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of an open file; fewer only when the file ends first. One
    ``pread`` of what the file holds there (pieces joined would copy every byte again)."""
    end = min(end, max(start, os.fstat(fd).st_size))
    if end - start <= _ONE_READ:
        first = os.pread(fd, end - start, start)
        if len(first) == end - start or not first:
            return first
        parts, position = [first], start + len(first)  # a short read: the rest in pieces
    else:
        parts, position = [], start
    while position < end:  # pread may return less than asked before the end: keep going
        # os.pread allocates what it is asked for: cap it, an ``end`` far past EOF is allowed.
        chunk = os.pread(fd, min(end - position, _CHUNK), position)
        if not chunk:
            break
        parts.append(chunk)
        position += len(chunk)
    return b"".join(parts)
