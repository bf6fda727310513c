"""Upload a local trial directory to S3 (in the benchmark: a moto server on 127.0.0.1).

    .venv/bin/python bench/s3_upload.py --src bench/.work/trials/big_2000x50x256 \
        --bucket bench-trials --prefix big_2000x50x256

The endpoint, credentials and region come from the environment (``AWS_ENDPOINT_URL``, ...),
exactly as the readers under test get them.  Creates the bucket if needed, uploads every file
under ``--src`` to ``<prefix>/<relative path>`` and checks that the listing has them all.
Used by bench/run.py --s3; needs boto3 (the project venv has it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--src", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--threads", type=int, default=8)
    args = p.parse_args(argv)

    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", config=Config(max_pool_connections=args.threads * 2))
    try:
        s3.create_bucket(Bucket=args.bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass

    src = os.path.abspath(args.src)
    prefix = args.prefix.strip("/")
    files = []
    for d, _, fs in os.walk(src):
        for f in fs:
            full = os.path.join(d, f)
            files.append((full, f"{prefix}/{os.path.relpath(full, src)}"))
    files.sort()

    def put(item):
        full, key = item
        with open(full, "rb") as fh:
            s3.put_object(Bucket=args.bucket, Key=key, Body=fh.read())

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(put, files))

    seen = 0
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=args.bucket, Prefix=prefix + "/"
    ):
        seen += len(page.get("Contents", []))
    if seen != len(files):
        print(f"uploaded {len(files)} files but the listing shows {seen}", file=sys.stderr)
        return 1
    print(
        f"uploaded {len(files)} files to s3://{args.bucket}/{prefix} in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
