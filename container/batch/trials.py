"""The batch's trials: each argument is a trial, or a folder / S3 prefix whose sub-folders are.

A location is a trial when it holds ``collections/`` or ``index/`` (or ``training_job_end.ts``);
otherwise each sub-folder that is a trial, or that holds one in ``debug-output/`` (SageMaker's
``<output_path>/<job>/debug-output``), is one, and the others (a ``rule-output`` folder, say)
are skipped. S3 prefixes are listed with a delimiter, one LIST request per folder looked at,
never the trial's objects.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.config.trial_list import parse_trial_list, trial_names
from evaluator.config.values import check_location
from evaluator.errors import ConfigurationError
from evaluator.storage.schemes import is_remote, local_path, split_remote

__all__ = ["Trial", "find_trials"]

_MARKERS = ("collections", "index")
_END_MARKER = "training_job_end.ts"
_SAGEMAKER_FOLDER = "debug-output"


@dataclass(frozen=True)
class Trial:
    """One job's trial and the name of its output folder."""

    name: str
    location: str


def find_trials(arguments: Sequence[str], trials_files: Sequence[str] = ()) -> list[Trial]:
    """Every trial the arguments and list files name, in order, with distinct names."""
    given = list(arguments)
    for name in trials_files:
        try:
            given += parse_trial_list(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigurationError(f"cannot read --trials-file {name!r}: {e}") from None
    if not given:
        raise ConfigurationError(
            "no trial given: name trials (folders or s3:// prefixes), a folder or prefix whose "
            "sub-folders are trials, or --trials-file FILE"
        )
    s3 = _S3Lister()
    found: list[str] = []
    for argument in given:
        location = check_location("TRIAL", argument.strip())
        lister: _Lister = s3 if is_remote(location) else _LocalLister()
        found += _expand(lister, location)
    unique = list(dict.fromkeys(found))
    return [Trial(n, t) for n, t in zip(trial_names(unique), unique)]


class _Lister(ABC):
    @abstractmethod
    def children(self, location: str) -> tuple[set[str], set[str]]:
        """(sub-folder names, file names) directly in ``location``."""

    def join(self, location: str, name: str) -> str:
        return location.rstrip("/") + "/" + name


def _is_trial(folders: Iterable[str], files: Iterable[str]) -> bool:
    return any(m in folders for m in _MARKERS) or _END_MARKER in files


def _expand(lister: _Lister, location: str) -> list[str]:
    folders, files = lister.children(location)
    if _is_trial(folders, files):
        return [location]
    found = []
    for name in sorted(folders):
        sub = lister.join(location, name)
        sub_folders, sub_files = lister.children(sub)
        if _is_trial(sub_folders, sub_files):
            found.append(sub)
        elif _SAGEMAKER_FOLDER in sub_folders:
            inner = lister.join(sub, _SAGEMAKER_FOLDER)
            if _is_trial(*lister.children(inner)):
                found.append(inner)
    if not found:
        raise ConfigurationError(
            f"{location} is not a trial (no collections/ or index/ in it) and none of its "
            f"{len(folders)} sub-folder(s) is one: give trials, or the folder that holds them"
        )
    return found


class _LocalLister(_Lister):
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


class _S3Lister(_Lister):
    """One LIST request with a delimiter per folder; endpoint, region and credentials from the
    standard AWS chain (``AWS_ENDPOINT_URL`` included), as the trials themselves."""

    def __init__(self) -> None:
        self._client: Any = None

    def children(self, location: str) -> tuple[set[str], set[str]]:
        bucket, prefix = split_remote(location)
        prefix = prefix.strip("/")
        prefix = prefix + "/" if prefix else ""
        folders: set[str] = set()
        files: set[str] = set()
        try:
            paginator = self._s3().get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
                for common in page.get("CommonPrefixes", []):
                    folders.add(common["Prefix"][len(prefix) :].strip("/"))
                for item in page.get("Contents", []):
                    files.add(item["Key"][len(prefix) :])
        except Exception as e:  # botocore's errors: say what to check, never the credentials
            code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
            raise ConfigurationError(
                f"cannot list {location} ({code}): check the bucket name and that the "
                "credentials allow s3:ListBucket on it"
            ) from None
        return folders, files

    def _s3(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client
