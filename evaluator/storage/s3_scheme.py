"""The ``s3://`` scheme (``evaluator.storage.schemes``): Amazon S3 and compatible stores,
read by ``S3Storage``, whose client is imported only when an S3 trial is opened; a prefix's
sub-folders are listed by ``S3Folders`` (``rule-evaluator batch s3://bucket/jobs/``), and
``rule-evaluator upload`` writes through ``S3Uploader`` (boto3)."""

from __future__ import annotations

import re
from typing import Any

from evaluator.storage.base import FolderLister, Storage, Uploader
from evaluator.storage.schemes import Scheme

__all__ = ["S3_SCHEME"]


def _open(uri: str, **options: Any) -> Storage:
    # botocore (credentials, endpoint rules) takes about half a second to import
    from evaluator.storage.s3 import S3Storage

    return S3Storage(uri, **options)


def _folders() -> FolderLister:
    from evaluator.storage.s3_folders import S3Folders

    return S3Folders()


def _uploader(uri: str, **options: Any) -> Uploader:
    from evaluator.storage.s3_upload import S3Uploader

    return S3Uploader(uri, **options)


S3_SCHEME = Scheme(
    prefix="s3://",
    form="s3://<bucket>/<prefix>",
    pattern=re.compile(r"s3://[^\s/]+(/\S*)?"),
    opener=_open,
    folders=_folders,
    uploader=_uploader,
)
