"""Uploading to a local folder (a plain path or ``file://``): ``rule-evaluator upload FOLDER
/other/folder`` copies a trial or a rule folder the way an upload to a remote store would, so
the same command and the same keys serve every destination.

The destination is made as needed (there is no bucket to create). Each file is written under a
temporary ``*.tmp`` name, which readers never list, then renamed over its final name, so a rule
reading the destination while files arrive never sees half a file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from evaluator.errors import StorageError
from evaluator.storage.schemes import local_path

__all__ = ["FolderUploader"]


class FolderUploader:
    """An ``Uploader`` writing ``<folder>/<key>`` below one local folder."""

    def __init__(self, location: str) -> None:
        self._root = Path(local_path(location)).absolute()

    @property
    def uri(self) -> str:
        return str(self._root)

    def ready(self, create: bool) -> None:
        """Make the destination folder (``create`` changes nothing: a folder is always made)."""
        if self._root.exists() and not self._root.is_dir():
            raise StorageError(f"{self._root} is a file, not a folder", uri=self.uri)
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot make the folder {self._root}: {e.strerror}") from None

    def put_file(self, key: str, path: Path) -> None:
        target = Path(os.path.normpath(self._root.joinpath(*key.split("/"))))
        if self._root not in target.parents:
            raise StorageError(f"key {key!r} is not below {self._root}", uri=self.uri)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
            )
            os.close(fd)
            try:
                shutil.copyfile(path, temporary)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as e:
            where = e.filename or target
            raise StorageError(f"cannot write {where}: {e.strerror}", uri=str(target)) from None

    def close(self) -> None:
        return None
