"""Shared fixtures: a moto S3 server on 127.0.0.1 for the whole session, a fresh bucket per test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.support.s3server import REGION, MotoS3, start_moto_server

# Fake but distinctive: tests grep logs and messages for them to prove they never leak.
TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIATESTKEYID0000000",
    "AWS_SECRET_ACCESS_KEY": "test-secret-key-must-never-be-printed",
    "AWS_SESSION_TOKEN": "test-session-token-must-never-be-printed",
}
# Anything that could send the tests to a real account or make botocore probe the network.
_ISOLATED_ENV = {
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
_CLEARED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3]:
    """A moto S3 server on 127.0.0.1; AWS_ENDPOINT_URL and dummy credentials point at it."""
    server = start_moto_server()
    with pytest.MonkeyPatch.context() as patch:
        for name in _CLEARED:
            patch.delenv(name, raising=False)
        for name, value in {**_ISOLATED_ENV, **TEST_CREDENTIALS}.items():
            patch.setenv(name, value)
        patch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        yield server
    server.stop()


@pytest.fixture
def s3_bucket(s3_server: MotoS3) -> str:
    """The name of a new, empty bucket."""
    return s3_server.new_bucket()


@pytest.fixture
def upload_folder(
    s3_server: MotoS3, s3_bucket: str
) -> Callable[[str | os.PathLike[str], str], str]:
    """``upload_folder(folder, prefix)`` copies a folder into ``s3_bucket``; returns its URI."""

    def upload(folder: str | os.PathLike[str], prefix: str) -> str:
        return s3_server.upload_folder(folder, s3_bucket, prefix)

    return upload
