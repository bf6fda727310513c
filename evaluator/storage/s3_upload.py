"""Uploading to S3 (the ``s3://`` scheme's ``Uploader``): boto3's ``upload_file`` (multipart for
large files), botocore's standard retries (3 attempts), a 5 s connect timeout, the read path's
read timeout (20 s without a byte of an answer: docs/s3.md), and a refused connection tried
again for ``endpoint_wait`` seconds before the first file, so ``moto_server &`` then ``upload`` works
in one script. The endpoint, region and credentials come from the standard AWS chain
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, profiles, roles), as for reading.

Messages are botocore's with any URL secret masked (``evaluator.redaction``): an endpoint's
password or a signature never reaches the user's terminal or a CI log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evaluator.errors import BucketNotFound, StorageError
from evaluator.redaction import redact_value
from evaluator.storage.s3_reach import READ_TIMEOUT as DEFAULT_READ_TIMEOUT
from evaluator.storage.schemes import split_remote

__all__ = ["DEFAULT_ENDPOINT_WAIT", "DEFAULT_READ_TIMEOUT", "S3Uploader"]

DEFAULT_ENDPOINT_WAIT = 10.0  # seconds a refused connection is tried again before the first file
_ATTEMPTS = 3  # botocore's standard retry mode: throttling, 5xx and connection errors
_CONNECT_TIMEOUT = 5.0


class S3Uploader:
    """An ``Uploader`` writing ``s3://bucket/<prefix>/<key>``."""

    def __init__(
        self,
        uri: str,
        *,
        endpoint_wait: float = DEFAULT_ENDPOINT_WAIT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        bucket, prefix = split_remote(uri)
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        self._wait = endpoint_wait
        self._read_timeout = read_timeout
        self._client: Any = None

    @property
    def uri(self) -> str:
        root = f"s3://{self._bucket}"
        return f"{root}/{self._prefix}" if self._prefix else root

    def ready(self, create: bool) -> None:
        # One small request first: a server just started is waited for, an endpoint that does
        # not answer fails here (once, not per file), a missing bucket is named.
        with _translated(self._wait, self._read_timeout):
            if self._bucket_exists():
                return
            if not create:
                raise BucketNotFound(f"bucket {self._bucket!r} does not exist", uri=self.uri)
            region = self._s3().meta.region_name
            extra = (
                {}
                if region in (None, "us-east-1")
                else {"CreateBucketConfiguration": {"LocationConstraint": region}}
            )
            self._s3().create_bucket(Bucket=self._bucket, **extra)

    def put_file(self, key: str, path: Path) -> None:
        with _translated(self._wait, self._read_timeout):
            self._s3().upload_file(
                str(path), self._bucket, f"{self._prefix}/{key}" if self._prefix else key
            )

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _s3(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            retries: Any = {"mode": "standard", "max_attempts": _ATTEMPTS}
            config = Config(
                retries=retries,
                connect_timeout=_CONNECT_TIMEOUT,
                read_timeout=self._read_timeout,
            )
            self._client = boto3.client("s3", config=config)
        return self._client

    def _bucket_exists(self) -> bool:
        """Whether the bucket exists; a refused connection is tried again for the endpoint
        wait (a local server still starting), then raised."""
        from botocore.exceptions import ClientError, EndpointConnectionError

        deadline = time.monotonic() + self._wait
        while True:
            try:
                self._s3().head_bucket(Bucket=self._bucket)
            except EndpointConnectionError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.25)
                continue
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code"))
                if code in ("404", "NoSuchBucket", "NotFound"):
                    return False
                raise
            return True


@contextmanager
def _translated(wait: float, read_timeout: float) -> Iterator[None]:
    """botocore's and boto3's failures as ``StorageError``s, URL secrets masked."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    try:
        yield
    except ReadTimeoutError as e:
        raise StorageError(
            f"{redact_value(str(e))}: the endpoint took the connection but sent no answer within "
            f"{read_timeout:g} s ({_ATTEMPTS} attempts)"
        ) from None
    except EndpointConnectionError as e:
        raise StorageError(
            f"{redact_value(str(e))} (tried for {wait:g} s): is the S3 server running there? "
            "The endpoint comes from AWS_ENDPOINT_URL when set"
        ) from None
    except (BotoCoreError, ClientError, Boto3Error) as e:
        raise StorageError(redact_value(str(e))) from None
