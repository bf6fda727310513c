"""What a location holds directly, its sub-folders and files, for any scheme: how
``rule-evaluator batch`` expands a folder or prefix whose sub-folders are trials.

A local folder is read with ``scandir``; a remote scheme uses its own ``FolderLister`` when its
``Scheme`` has one (S3: a LIST with a delimiter per folder), else ``ListedFolders`` below, which
needs nothing but the scheme's ``Storage``: so a new scheme is batch-ready by its registration.
"""

from __future__ import annotations

import asyncio

from evaluator.errors import ConfigurationError, StorageError
from evaluator.storage.base import FolderLister
from evaluator.storage.schemes import Scheme, open_storage, scheme_of, split_remote

__all__ = ["Folders", "ListedFolders"]

# Sorts after every other character of a key: listing again after "<name>/" + _LAST skips the
# rest of the sub-folder <name>.
_LAST = "\U0010ffff"


class Folders:
    """``children`` of a location of any scheme; one lister per scheme, made on first use."""

    def __init__(self) -> None:
        self._listers: dict[str, FolderLister] = {}

    def children(self, location: str) -> tuple[set[str], set[str]]:
        """``(sub-folder names, file names)`` directly in ``location``; a
        ``ConfigurationError`` naming it when it cannot be listed."""
        scheme = scheme_of(location)
        name = "" if scheme is None else scheme.prefix
        lister = self._listers.get(name)
        if lister is None:
            lister = self._listers[name] = _lister(scheme)
        return lister.children(location)


def _lister(scheme: Scheme | None) -> FolderLister:
    if scheme is None:
        from evaluator.storage.local import LocalFolders

        return LocalFolders()
    return scheme.folders() if scheme.folders is not None else ListedFolders(scheme)


class ListedFolders:
    """A ``FolderLister`` for a scheme with none of its own: the bucket's storage lists the
    keys under the location, and each sub-folder seen is skipped by listing again after it,
    so the cost is one listing per entry, never a trial's objects."""

    def __init__(self, scheme: Scheme) -> None:
        self._scheme = scheme

    def children(self, location: str) -> tuple[set[str], set[str]]:
        bucket, prefix = split_remote(location)
        prefix = prefix.strip("/")
        prefix = prefix + "/" if prefix else ""
        try:
            return asyncio.run(self._children(self._scheme.prefix + bucket, prefix))
        except StorageError as e:
            raise ConfigurationError(f"cannot list {location}: {e}") from None

    @staticmethod
    async def _children(root: str, prefix: str) -> tuple[set[str], set[str]]:
        folders: set[str] = set()
        files: set[str] = set()
        storage = open_storage(root)
        try:
            after: str | None = None
            while True:
                listing = storage.list_after(prefix, after)
                try:
                    async for info in listing:
                        name, sep, _ = info.key[len(prefix) :].partition("/")
                        if not sep:
                            files.add(name)
                        elif name not in folders:
                            folders.add(name)
                            after = f"{prefix}{name}/{_LAST}"
                            break
                    else:
                        return folders, files
                finally:  # a listing left at a sub-folder: its generator closed now, not by GC
                    close = getattr(listing, "aclose", None)
                    if close is not None:
                        await close()
        finally:
            await storage.aclose()
