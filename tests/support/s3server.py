"""A moto S3 server on 127.0.0.1 (real HTTP, its own thread) and helpers to fill buckets."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.s3.models import s3_backends

__all__ = ["MotoS3", "start_moto_server"]

REGION = "us-east-1"


@dataclass
class MotoS3:
    """A running moto server; ``endpoint`` is its ``http://127.0.0.1:<port>`` URL."""

    endpoint: str
    server: ThreadedMotoServer

    def client(self) -> Any:
        """A boto3 S3 client that talks to the server directly (never through a proxy)."""
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION)

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name and return the name."""
        name = f"test-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def put_objects(self, bucket: str, objects: Mapping[str, bytes], *, prefix: str = "") -> None:
        """Store ``{key: data}`` under ``prefix``.

        The server runs in this process, so objects go straight into its backend: about 0.1 ms
        each instead of about 10 ms for a PUT through werkzeug. Reading them back still goes over
        HTTP like any client.
        """
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key, data in objects.items():
            backend.put_object(bucket, f"{prefix}{key}", bytes(data))

    def upload_folder(self, folder: str | os.PathLike[str], bucket: str, prefix: str) -> str:
        """Upload every file below ``folder`` to ``s3://bucket/prefix/...``; return that URI."""
        root = Path(folder)
        prefix = prefix.strip("/")
        objects = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file()
        }
        self.put_objects(bucket, objects, prefix=f"{prefix}/" if prefix else "")
        return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"

    def stop(self) -> None:
        self.server.stop()


def start_moto_server() -> MotoS3:
    """Start moto's threaded server on a free port of 127.0.0.1."""
    # werkzeug logs one line per request; the tests do not need them.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return MotoS3(endpoint=f"http://{host}:{port}", server=server)
