"""S3 error translation, without a server: each botocore failure maps to one storage error."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from evaluator.errors import AccessDenied, BucketNotFound, ObjectNotFound, StorageError
from evaluator.storage.s3 import _translate

TARGET = "s3://bucket/trial/index/000000000/000000000001_worker_0.json"


def _client_error(code: str, status: int, message: str = "text from S3") -> ClientError:
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchKey", 404, ObjectNotFound),
        ("404", 404, ObjectNotFound),  # HeadObject has no body, so no code but the status
        ("NoSuchBucket", 404, BucketNotFound),
        ("AccessDenied", 403, AccessDenied),
        ("403", 403, AccessDenied),
        ("AllAccessDisabled", 403, AccessDenied),
        ("InvalidAccessKeyId", 403, StorageError),
        ("ExpiredToken", 400, StorageError),
        ("SlowDown", 503, StorageError),
    ],
)
def test_codes_map_to_storage_errors(code: str, status: int, expected: type[StorageError]) -> None:
    """Each S3 error code becomes the matching ``StorageError`` subclass, and no other."""
    error = _translate(_client_error(code, status), TARGET, "bucket", "s3:GetObject")
    assert type(error) is expected
    assert error.uri == TARGET


def test_access_denied_names_the_uri_and_the_permission() -> None:
    """A 403 says which URI was refused and which IAM permission to grant."""
    read = _translate(_client_error("AccessDenied", 403), TARGET, "bucket", "s3:GetObject")
    listing = _translate(
        _client_error("AccessDenied", 403), "s3://bucket/trial/index/", "bucket", "s3:ListBucket"
    )
    assert TARGET in str(read) and "s3:GetObject" in str(read)
    assert "s3://bucket/trial/index/" in str(
        listing
    ) and "s3:ListBucket on arn:aws:s3:::bucket" in str(listing)


def test_bucket_not_found_names_the_bucket() -> None:
    """A missing bucket is named in the message."""
    error = _translate(_client_error("NoSuchBucket", 404), TARGET, "bucket", "s3:GetObject")
    assert "'bucket'" in str(error)


def test_missing_credentials_say_how_to_provide_them() -> None:
    """No credentials at all gives a message listing the ways to provide them."""
    error = _translate(NoCredentialsError(), TARGET, "bucket", "s3:GetObject")
    assert type(error) is StorageError
    assert (
        "AWS_ACCESS_KEY_ID" in str(error) and "AWS_PROFILE" in str(error) and "role" in str(error)
    )


def test_connection_failures_name_the_uri() -> None:
    """An unreachable endpoint becomes a ``StorageError`` naming what was being read."""
    error = _translate(
        EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), TARGET, "bucket", "s3:GetObject"
    )
    assert type(error) is StorageError and TARGET in str(error) and "127.0.0.1:9" in str(error)
