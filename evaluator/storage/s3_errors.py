"""S3 failures as the project's storage errors: ``ObjectNotFound``, ``AccessDenied`` (naming the
URI and the permission to grant), ``BucketNotFound`` or ``StorageError``. Fed botocore's public
exception classes (``ClientError`` with S3's code and message, the connection errors), which
``s3_answers`` builds from obstore's answers. Messages name URIs, error codes and environment
variable names, never credential values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from evaluator.errors import AccessDenied, BucketNotFound, ObjectNotFound, StorageError

if TYPE_CHECKING:
    from evaluator.storage.s3_answers import Reply

__all__ = ["RangeNotSatisfiable", "client_error", "listing_went_back", "translate"]

_NOT_FOUND = {"NoSuchKey", "NotFound", "404"}
_DENIED = {"AccessDenied", "AllAccessDisabled", "Forbidden", "403"}
_BAD_CREDENTIALS = {
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "SignatureDoesNotMatch",
    "TokenRefreshRequired",
}
_NO_CREDENTIALS = (
    "no usable AWS credentials for {uri}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE, or run with an IAM role "
    "(instance profile, ECS task role, IRSA web identity)"
)


class RangeNotSatisfiable(StorageError):
    """S3's 416: the range starts at or after the object's end (or the object is empty)."""


def listing_went_back(uri: str, client: Any, last: str, key: str) -> StorageError:
    """S3 lists keys in order, each once: a key at or before the one before means the
    endpoint sent a continuation token again (a loop that would list for ever), so the
    listing ends there (obstore gathers pages into chunks of 1000 keys: within one chunk of
    the repeat)."""
    endpoint = client.endpoint if client is not None else "S3"
    return StorageError(
        f"the listing of {uri} went back from key {last!r} to {key!r}: the endpoint "
        f"{endpoint} repeats a continuation token (an S3-compatible server or proxy that "
        "pages wrongly); the listing was stopped at the repeat"
    )


def client_error(reply: Reply | None, operation: str, retries: int) -> ClientError:
    """An error answer as botocore's ``ClientError`` (S3's code and message, the status and
    how many retries it took): what ``translate`` reads. Only the code and S3's message are
    kept from the answer, never its other fields (an ``InvalidAccessKeyId`` answer names the
    key id)."""
    response: dict[str, Any] = {
        "Error": {
            "Code": reply.code if reply is not None else "",
            "Message": reply.message if reply is not None else "",
        },
        "ResponseMetadata": {
            "HTTPStatusCode": reply.status if reply is not None else 0,
            "RetryAttempts": retries,
        },
    }
    return ClientError(response, operation)


def translate(error: Exception, target: str, bucket: str, permission: str) -> StorageError:
    """The storage error for a botocore failure on ``target`` (message only, no cause set)."""
    if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
        return StorageError(_NO_CREDENTIALS.format(uri=target), uri=target)
    if isinstance(error, (BotoConnectionError, HTTPClientError)):
        return StorageError(f"cannot reach S3 for {target}: {error}", uri=target)
    if not isinstance(error, ClientError):
        return StorageError(f"S3 request for {target} failed: {error}", uri=target)
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code == "NoSuchBucket":
        return BucketNotFound(f"bucket {bucket!r} does not exist (reading {target})", uri=target)
    if code in _NOT_FOUND or (status == 404 and not code):
        return ObjectNotFound(f"{target} does not exist", uri=target)
    if code == "InvalidRange":
        return RangeNotSatisfiable(f"range not satisfiable for {target}", uri=target)
    if code in _DENIED or (status == 403 and code not in _BAD_CREDENTIALS):
        return AccessDenied(_denied_message(target, bucket, permission), uri=target)
    if code in _BAD_CREDENTIALS:
        return StorageError(
            f"S3 rejected the credentials ({code}) reading {target}: check that they are "
            "current and belong to the account that owns the bucket",
            uri=target,
        )
    message = error.response.get("Error", {}).get("Message", "")
    attempts = error.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) + 1
    return StorageError(
        f"S3 answered {code or status} for {target} ({attempts} attempts): {message}", uri=target
    )


def _denied_message(target: str, bucket: str, permission: str) -> str:
    if permission == "s3:ListBucket":
        return (
            f"access denied listing {target}: the credentials need s3:ListBucket "
            f"on arn:aws:s3:::{bucket}"
        )
    # S3 hides from callers who may not list whether a key exists: a missing key is a 403 too.
    return (
        f"access denied reading {target}: the credentials need {permission} on "
        f"arn:aws:s3:::{target.removeprefix('s3://')} (without s3:ListBucket on the bucket, "
        "S3 also answers 403 for a missing object)"
    )
