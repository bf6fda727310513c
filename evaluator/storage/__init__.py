"""Storage backends behind one small async protocol (see ``base.Storage``).

``open_storage`` picks the backend from the trial location: ``file:///path`` or a plain path
is a local folder, a registered scheme's URI (``s3://bucket/prefix``) its remote store; what
the schemes are, and every question about a location, is ``evaluator.storage.schemes``. A new
scheme is one module building its ``Scheme`` and one ``register_scheme`` line below.
``MemoryStorage`` is for tests.
"""

from __future__ import annotations

from typing import Any

from evaluator.storage.base import ObjectInfo, Storage
from evaluator.storage.local import LocalStorage
from evaluator.storage.memory import MemoryStorage
from evaluator.storage.s3_scheme import S3_SCHEME
from evaluator.storage.schemes import open_storage, register_scheme

__all__ = ["LocalStorage", "MemoryStorage", "ObjectInfo", "S3Storage", "Storage", "open_storage"]


def __getattr__(name: str) -> Any:
    # botocore and obstore (credentials, endpoint rules, the client) take a while to import:
    # only S3 users pay for them.
    if name == "S3Storage":
        from evaluator.storage.s3 import S3Storage

        return S3Storage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register_scheme(S3_SCHEME)
