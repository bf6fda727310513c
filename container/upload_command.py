"""``rule-evaluator upload FOLDER DESTINATION``: copy a trial or rule folder to any location
that can be written (``s3://bucket/prefix``, another folder, a ``file://`` URI, a registered
scheme with an uploader), for CI and tests against a local S3 (moto, MinIO, LocalStack) or a
real bucket, without the AWS CLI. Writing is the storage schemes' job
(``evaluator.storage.schemes.open_uploader``); this command checks the arguments, walks the
folder and reports.

For S3 the endpoint, region and credentials come from the standard AWS chain
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ...), as for reading. ``--create-bucket`` creates the
bucket first when it does not exist. A freshly started local server is waited for (a refused
connection is tried again for ``ENDPOINT_WAIT`` seconds), so ``moto_server &`` then ``upload``
works in one script."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from container.suggest import SuggestingParser
from evaluator.errors import BucketNotFound, ClientError, ExitCode
from evaluator.storage.schemes import (
    check_location,
    is_remote,
    local_path,
    open_uploader,
    upload_forms,
)

__all__ = ["ENDPOINT_WAIT", "main"]

ENDPOINT_WAIT = 10.0  # seconds a refused connection is tried again before the upload starts


def main(argv: Sequence[str]) -> int:
    parser = SuggestingParser(
        prog="rule-evaluator upload",
        description=(
            "Copy every file below FOLDER to DESTINATION/<relative path>: s3://bucket/prefix "
            "(e.g. a trial for a CI run against moto: the endpoint comes from "
            "AWS_ENDPOINT_URL), another folder or a file:// URI."
        ),
    )
    parser.add_argument("folder", metavar="FOLDER", help="a local folder, e.g. a trial")
    parser.add_argument("uri", metavar="DESTINATION", help=f"where to copy it: {upload_forms()}")
    parser.add_argument(
        "--create-bucket", action="store_true", help="create the bucket when it does not exist"
    )
    args = parser.parse_args(list(argv))
    folder = Path(args.folder)
    try:
        check_location("the destination", args.uri)
    except ClientError as e:
        return _fail(str(e))
    if not folder.is_dir():
        return _fail(f"{args.folder} is not a folder: give the trial folder to upload")
    if not is_remote(args.uri) and _inside(Path(local_path(args.uri)), folder):
        return _fail(
            f"cannot upload {args.folder} into itself ({args.uri}): choose a destination "
            "outside the folder"
        )
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if not files:
        return _fail(f"{args.folder} holds no file to upload")
    try:
        uploader = open_uploader(args.uri, endpoint_wait=ENDPOINT_WAIT)
    except ClientError as e:
        return _fail(str(e))
    try:
        uploader.ready(create=args.create_bucket)
        for path in files:
            uploader.put_file(path.relative_to(folder).as_posix(), path)
    except BucketNotFound as e:
        return _fail(f"{e}: add --create-bucket")
    except ClientError as e:
        return _fail(f"uploading {args.folder} to {args.uri} failed: {e}")
    finally:
        uploader.close()
    print(f"uploaded {len(files)} file(s) from {args.folder} to {uploader.uri}")
    return 0


def _inside(destination: Path, folder: Path) -> bool:
    """Whether ``destination`` is ``folder`` or below it (links followed): copying a folder
    into itself would overwrite or re-copy what the user gave."""
    target, source = destination.resolve(), folder.resolve()
    return target == source or source in target.parents


def _fail(text: str) -> int:
    print(f"ClientError: {text}", file=sys.stderr)
    return ExitCode.CLIENT_ERROR
