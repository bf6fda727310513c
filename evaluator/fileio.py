"""Files written whole or not at all, and files read from a folder rule code could write.

Writes go to a temporary file, then a rename over the target: a reader never sees half a file,
and a symbolic link planted where the file or the temporary file goes is replaced, never
followed (``O_NOFOLLOW`` and ``O_EXCL``, relative to a directory opened once). Reads of files a
run left behind (``read_capped``) take only a regular file, within a size limit: a FIFO or a
device is refused without blocking (``O_NONBLOCK`` and ``fstat``), a symbolic link is refused.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

__all__ = [
    "UnsafeFile",
    "open_folder",
    "read_capped",
    "write_atomically",
    "write_atomically_at",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class UnsafeFile(ValueError):
    """A file that is not a regular file within its size limit (a FIFO, a device, a folder, a
    symbolic link, or too large); the message names the file and what is wrong."""


def open_folder(
    path: str | os.PathLike[str], *, follow: bool = True, dir_fd: int | None = None
) -> int:
    """A file descriptor of the folder ``path`` (with ``follow=False`` its last component must
    not be a symbolic link); raises ``OSError``."""
    flags = _DIR_FLAGS | (0 if follow else os.O_NOFOLLOW)
    return os.open(path, flags, dir_fd=dir_fd)


def read_capped(
    path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None, shown: str | None = None
) -> bytes:
    """The bytes of the regular file ``path`` (relative to ``dir_fd`` when given), at most
    ``limit`` of them. Raises ``FileNotFoundError`` when it is missing, ``UnsafeFile`` when it is
    a symbolic link, not a regular file or larger than ``limit``, other ``OSError`` as they come."""
    name = shown or os.fsdecode(path)
    try:
        fd = os.open(
            path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError as e:
        if e.errno == errno.ELOOP:  # the last component is a symbolic link
            raise UnsafeFile(
                f"{name} is a symbolic link, not a file this evaluator wrote"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{name} is not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise UnsafeFile(f"{name} is {info.st_size} bytes, over the limit of {limit}")
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnsafeFile(f"{name} grew over the limit of {limit} bytes while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a plain file"


def write_atomically_at(
    dir_fd: int, name: str, data: bytes, *, tmp_dir_fd: int | None = None
) -> None:
    """Write ``data`` to a new temporary file in ``tmp_dir_fd`` (default ``dir_fd``; same file
    system), then rename it over ``name`` in ``dir_fd``. Nothing is followed: the temporary
    file is created with ``O_EXCL | O_NOFOLLOW`` and the rename replaces whatever ``name`` was
    (a planted symbolic link included). Raises ``OSError`` (a full disk: ``ENOSPC``)."""
    tmp_fd = dir_fd if tmp_dir_fd is None else tmp_dir_fd
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=tmp_fd,
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=tmp_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=tmp_fd)
        raise


def write_atomically(path: Path, data: bytes, *, tmp_dir: Path) -> None:
    """Write ``data`` to a temporary file in ``tmp_dir`` (same file system as ``path``; under
    SageMaker's output, ``.sagemaker-ignore`` is never uploaded), then rename it over ``path``.
    The folders are made when missing; the temporary folder's last component and the file are
    never followed when they are symbolic links (``write_atomically_at``)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    dir_fd = open_folder(path.parent)
    try:
        if tmp_dir == path.parent:
            write_atomically_at(dir_fd, path.name, data)
            return
        tmp_fd = open_folder(tmp_dir, follow=False)
        try:
            write_atomically_at(dir_fd, path.name, data, tmp_dir_fd=tmp_fd)
        finally:
            os.close(tmp_fd)
    finally:
        os.close(dir_fd)
