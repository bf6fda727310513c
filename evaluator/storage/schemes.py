"""Storage schemes in one place: which trial locations are remote, how one is checked, split
into its bucket and key prefix, and opened.

A location is a plain path, a ``file://`` URL (both a local folder), or the URI of a
registered remote scheme (``s3://``, ``evaluator.storage.s3_scheme``). Everything above the
storage layer asks these functions instead of testing prefixes itself, so a new scheme (GCS,
Azure) is one module that builds a ``Scheme`` plus one ``register_scheme`` line in
``evaluator/storage/__init__.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.storage.base import FolderLister, Storage, Uploader

__all__ = [
    "FILE_PREFIX",
    "Scheme",
    "check_location",
    "is_remote",
    "local_path",
    "location_forms",
    "open_storage",
    "open_uploader",
    "register_scheme",
    "registered_schemes",
    "scheme_of",
    "split_remote",
    "upload_forms",
]

FILE_PREFIX = "file://"


@dataclass(frozen=True)
class Scheme:
    """A remote store. Its URIs are ``<prefix><bucket>/<key prefix>``; ``opener`` makes the
    ``Storage`` for one (importing its client only then), taking the trial's client deadlines
    as keyword arguments (``connect_timeout``, ``read_timeout``, ``request_deadline``,
    ``outage_tolerance``) and any other backend option.

    ``folders``, optional, makes the ``FolderLister`` that lists a location's sub-folders
    directly (S3: a LIST with a delimiter); without it ``evaluator.storage.folders`` lists them
    through the storage's own listing, one listing per sub-folder.

    ``uploader``, optional, makes the ``Uploader`` that writes objects under a location
    (``rule-evaluator upload``), taking the location and keyword options (``endpoint_wait``:
    seconds a refused connection is tried again); a scheme without it is read-only."""

    prefix: str  # "s3://"
    form: str  # how messages spell a location: "s3://<bucket>/<prefix>"
    pattern: re.Pattern[str]  # a well-formed location, matched whole
    opener: Callable[..., Storage]
    folders: Callable[[], FolderLister] | None = None
    uploader: Callable[..., Uploader] | None = None

    @property
    def example(self) -> str:
        """``form`` without the angle brackets: ``s3://bucket/prefix``."""
        return self.form.replace("<", "").replace(">", "")


_SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> None:
    """Make ``scheme`` known (again: the newer registration replaces the older)."""
    _SCHEMES[scheme.prefix] = scheme


def registered_schemes() -> list[Scheme]:
    return list(_SCHEMES.values())


def scheme_of(location: str) -> Scheme | None:
    """The remote scheme of ``location``; None for a local folder (a path or ``file://``)
    and for a scheme nobody registered."""
    for prefix, scheme in _SCHEMES.items():
        if location.startswith(prefix):
            return scheme
    return None


def is_remote(location: str) -> bool:
    """Whether ``location`` is in a remote store (not a local folder)."""
    return scheme_of(location) is not None


def local_path(location: str) -> str:
    """The folder a local location names: ``file://`` taken off, ``~`` expanded."""
    return os.path.expanduser(location.removeprefix(FILE_PREFIX))


def split_remote(location: str) -> tuple[str, str]:
    """``(bucket, key prefix)`` of a remote location (``s3://b/a/b/`` -> ``("b", "a/b/")``;
    the prefix is ``""`` for a bare bucket). ``ValueError`` for a local one."""
    scheme = scheme_of(location)
    if scheme is None:
        raise ValueError(f"{location!r} is not a remote location")
    bucket, _, prefix = location[len(scheme.prefix) :].partition("/")
    return bucket, prefix


def location_forms() -> str:
    """The locations we read, for messages: ``s3://<bucket>/<prefix>, a folder or a file://
    URI``."""
    return ", ".join([s.form for s in _SCHEMES.values()] + ["a folder or a file:// URI"])


def check_location(key: str, value: str) -> str:
    """``value`` when it is a well-formed remote URI, a ``file://`` URL or a path; else a
    ``ConfigurationError`` naming ``key`` and the forms we read."""
    scheme = scheme_of(value)
    if scheme is not None:
        if not scheme.pattern.fullmatch(value):
            raise ConfigurationError(f"{key} must be {location_forms()}, got {value!r}")
        _check_key_prefix(key, value, scheme.prefix)
        return value
    if "://" in value and not value.startswith(FILE_PREFIX):
        raise ConfigurationError(
            f"{key} must be {location_forms()}, got {value!r} (unsupported scheme)"
        )
    if value == FILE_PREFIX:
        raise ConfigurationError(f"{key} must name a folder after file://, got {value!r}")
    return value


def _check_key_prefix(key: str, value: str, scheme: str) -> None:
    """Object keys are not paths: nothing resolves ``..`` in them, and the object-store client
    refuses a prefix with a ``.``, ``..`` or empty part. Such a location is refused here, as a
    ClientError naming it, before any request."""
    bucket, prefix = split_remote(value)
    parts = prefix.rstrip("/").split("/") if prefix.rstrip("/") else []
    bad = next((p for p in parts if p in ("", ".", "..")), None)
    if bad is None:
        return
    what = "an empty part (//)" if bad == "" else f"a {bad!r} part"
    raise ConfigurationError(
        f"{key} {value!r} has {what} in its key prefix: object keys are not paths, so '..' "
        f"and '.' are not resolved; give the prefix the objects have ({scheme}{bucket}/a/b, "
        "without '.', '..' or '//')"
    )


def open_storage(uri: str, **options: Any) -> Storage:
    """The backend for ``uri``; ``options`` go to its constructor as keyword arguments."""
    scheme = scheme_of(uri)
    if scheme is not None:
        return scheme.opener(uri, **options)
    if uri.startswith(FILE_PREFIX) or "://" not in uri:
        from evaluator.storage.local import LocalStorage

        return LocalStorage(uri, **options)
    remote = "".join(f"{s.example}, " for s in _SCHEMES.values())
    raise ConfigurationError(
        f"unsupported trial location {uri!r}: use {remote}file:///path or a folder path"
    )


def upload_forms() -> str:
    """The locations ``upload`` writes to, for messages: the schemes with an uploader and local
    folders."""
    forms = [s.form for s in _SCHEMES.values() if s.uploader is not None]
    return ", ".join([*forms, "a folder or a file:// URI"])


def open_uploader(location: str, **options: Any) -> Uploader:
    """The writer of objects under ``location`` (checked by ``check_location`` first): a local
    folder's, or its scheme's, given ``options``; a ``ConfigurationError`` naming the locations
    that can be written when its scheme has no uploader."""
    scheme = scheme_of(location)
    if scheme is None:
        from evaluator.storage.folder_upload import FolderUploader

        return FolderUploader(location)
    if scheme.uploader is None:
        raise ConfigurationError(
            f"cannot upload to {location}: {scheme.prefix} locations are only read here; "
            f"upload to {upload_forms()}"
        )
    return scheme.uploader(location, **options)
