"""smdebug.core.collection_manager: ``CollectionManager``, the collections file of a worker."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evaluator.errors import SMDebugNotImplementedError
from evaluator.fileio import write_atomically
from evaluator.formats.collections_file import (
    Collection,
    CollectionsFile,
    parse_collections_file,
    serialize_collections_file,
)
from evaluator.storage.schemes import is_remote

__all__ = ["CollectionManager"]


class CollectionManager:
    """Collections by name, and the job's worker count, as written to and read from
    ``<trial>/collections/000000000/<file name>``."""

    def __init__(self, collections: dict[str, Collection] | None = None, **_: Any) -> None:
        self.collections: dict[str, Collection] = dict(collections or {})
        self._num_workers = 1

    def add(self, arg: str | Collection | list[Any]) -> None:
        """Add a collection, or an empty one of that name (kept if it exists)."""
        if isinstance(arg, list):
            for item in arg:
                self.add(item)
        elif isinstance(arg, Collection):
            self.collections[arg.name] = arg
        elif arg not in self.collections:
            self.collections[arg] = Collection(arg)

    def get(self, name: str, create: bool = True) -> Collection:
        """The collection ``name``; created empty when missing (unless ``create`` is false:
        KeyError)."""
        if name not in self.collections:
            if not create:
                raise KeyError(f"Collection {name} has not been added to the collection manager")
            self.add(name)
        return self.collections[name]

    def get_num_workers(self) -> int:
        return self._num_workers

    def set_num_workers(self, num_workers: int) -> None:
        self._num_workers = int(num_workers)

    def export(self, out_dir: str, filename: str) -> None:
        """Write ``<out_dir>/collections/000000000/<filename>`` (a local folder)."""
        if is_remote(str(out_dir)):
            raise SMDebugNotImplementedError(
                "this CollectionManager exports to local folders only: write the trial "
                "locally, then upload it"
            )
        document = CollectionsFile(dict(self.collections), self._num_workers)
        path = Path(os.path.join(out_dir, "collections", "000000000", filename))
        write_atomically(path, serialize_collections_file(document), tmp_dir=path.parent)

    @classmethod
    def load_from_string(cls, s: str | bytes) -> CollectionManager:
        parsed = parse_collections_file(s)
        manager = cls(parsed.collections)
        manager._num_workers = parsed.num_workers
        return manager

    @classmethod
    def load(cls, filename: str) -> CollectionManager:
        return cls.load_from_string(Path(filename).read_bytes())
