"""``rule-evaluator upload FOLDER s3://bucket/prefix``: copy a trial folder to S3, for CI and
tests against a local S3 (moto, MinIO, LocalStack) or a real bucket, without the AWS CLI.

The endpoint, region and credentials come from the standard AWS chain (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ...), as for reading. ``--create-bucket`` creates the bucket first when it does
not exist. A freshly started local server is waited for (a refused connection is tried again for
``ENDPOINT_WAIT`` seconds), so ``moto_server &`` then ``upload`` works in one script."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from container.suggest import SuggestingParser
from evaluator.errors import ExitCode
from evaluator.storage.s3_scheme import S3_SCHEME
from evaluator.storage.schemes import scheme_of, split_remote

__all__ = ["ENDPOINT_WAIT", "main"]

ENDPOINT_WAIT = 10.0  # seconds a refused connection is tried again before the upload starts


def main(argv: Sequence[str]) -> int:
    parser = SuggestingParser(
        prog="rule-evaluator upload",
        description=(
            "Copy every file below FOLDER to s3://bucket/prefix/<relative path>, e.g. a trial "
            "for a CI run against moto: the endpoint comes from AWS_ENDPOINT_URL."
        ),
    )
    parser.add_argument("folder", metavar="FOLDER", help="a local folder, e.g. a trial")
    parser.add_argument("uri", metavar="S3_URI", help="s3://bucket/prefix to copy it to")
    parser.add_argument(
        "--create-bucket", action="store_true", help="create the bucket when it does not exist"
    )
    args = parser.parse_args(list(argv))
    folder = Path(args.folder)
    if not _is_s3(args.uri):
        return _fail(f"{args.uri!r} is not an {S3_SCHEME.example} URI")
    if not folder.is_dir():
        return _fail(f"{args.folder} is not a folder: give the trial folder to upload")
    bucket, prefix = split_remote(args.uri)
    prefix = prefix.strip("/")
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if not files:
        return _fail(f"{args.folder} holds no file to upload")
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

    try:
        client = _client()
        # One small request first: a server just started is waited for, an endpoint that does
        # not answer fails here (once, not per file), a missing bucket is named.
        if not _bucket_exists(client, bucket):
            if not args.create_bucket:
                return _fail(f"bucket {bucket!r} does not exist: add --create-bucket")
            _create_bucket(client, bucket)
        for path in files:
            key = path.relative_to(folder).as_posix()
            client.upload_file(str(path), bucket, f"{prefix}/{key}" if prefix else key)
    except EndpointConnectionError as e:
        return _fail(
            f"uploading {args.folder} to {args.uri} failed: {e} (tried for {ENDPOINT_WAIT:g} s): "
            "is the S3 server running there? The endpoint comes from AWS_ENDPOINT_URL when set"
        )
    except (BotoCoreError, ClientError) as e:
        return _fail(f"uploading {args.folder} to {args.uri} failed: {e}")
    target = f"{S3_SCHEME.prefix}{bucket}/{prefix}" if prefix else f"{S3_SCHEME.prefix}{bucket}"
    print(f"uploaded {len(files)} file(s) from {args.folder} to {target}")
    return 0


def _is_s3(uri: str) -> bool:
    """Whether ``uri`` is a well-formed location of the registered ``s3://`` scheme: the one
    store this command writes to (boto3's upload), whatever else the evaluator reads."""
    scheme = scheme_of(uri)
    return (
        scheme is not None
        and scheme.prefix == S3_SCHEME.prefix
        and bool(scheme.pattern.fullmatch(uri))
    )


def _client() -> Any:
    import boto3
    from botocore.config import Config

    retries: Any = {"mode": "standard", "max_attempts": 3}
    return boto3.client("s3", config=Config(retries=retries, connect_timeout=5))


def _bucket_exists(client: Any, bucket: str) -> bool:
    """Whether the bucket exists; a refused connection is tried again for ENDPOINT_WAIT
    seconds (a local server still starting), then raised."""
    import time

    from botocore.exceptions import ClientError, EndpointConnectionError

    deadline = time.monotonic() + ENDPOINT_WAIT
    while True:
        try:
            client.head_bucket(Bucket=bucket)
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


def _create_bucket(client: Any, bucket: str) -> None:
    region = client.meta.region_name
    extra = (
        {}
        if region in (None, "us-east-1")
        else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    )
    client.create_bucket(Bucket=bucket, **extra)


def _fail(text: str) -> int:
    print(f"ClientError: {text}", file=sys.stderr)
    return ExitCode.CLIENT_ERROR
