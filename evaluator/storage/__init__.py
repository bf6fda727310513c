"""Storage backends behind one small async protocol (see ``base.Storage``).

``open_storage`` picks the backend from the trial location: ``s3://bucket/prefix`` is S3,
``file:///path`` or a plain path is a local folder. ``MemoryStorage`` is for tests.
"""

from __future__ import annotations

from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.storage.base import ObjectInfo, Storage
from evaluator.storage.local import LocalStorage
from evaluator.storage.memory import MemoryStorage

__all__ = ["LocalStorage", "MemoryStorage", "ObjectInfo", "S3Storage", "Storage", "open_storage"]


def __getattr__(name: str) -> Any:
    # botocore and obstore (credentials, endpoint rules, the client) take a while to import:
    # only S3 users pay for them.
    if name == "S3Storage":
        from evaluator.storage.s3 import S3Storage

        return S3Storage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_storage(uri: str, **options: Any) -> Storage:
    """The backend for ``uri``; ``options`` go to its constructor as keyword arguments."""
    if uri.startswith("s3://"):
        from evaluator.storage.s3 import S3Storage

        return S3Storage(uri, **options)
    if uri.startswith("file://") or "://" not in uri:
        return LocalStorage(uri, **options)
    raise ConfigurationError(
        f"unsupported trial location {uri!r}: use s3://bucket/prefix, file:///path or a folder path"
    )
