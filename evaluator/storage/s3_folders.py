"""The sub-folders and files directly under an ``s3://`` prefix, for ``rule-evaluator batch``:
one LIST request with a delimiter per folder looked at, never a trial's objects."""

from __future__ import annotations

from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.storage.schemes import split_remote

__all__ = ["S3Folders"]


class S3Folders:
    """A ``FolderLister`` over boto3's client, made on first use: endpoint, region and
    credentials from the standard AWS chain (``AWS_ENDPOINT_URL`` included), as the trials'."""

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
