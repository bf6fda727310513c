"""obstore's real failures, read by ``s3_answers.reply_or_raise``: each one is produced against
moto on 127.0.0.1 (or a closed port there), checked for the exception type obstore raised (what
the minor-release pin in pyproject.toml holds still), read into S3's answer or botocore's
exception, and translated into the storage error the user sees."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import boto3
import obstore
import pytest
from botocore.exceptions import EndpointConnectionError
from moto.core.authorization import enable_iam_authentication

from evaluator.errors import AccessDenied, BucketNotFound, ObjectNotFound, StorageError
from evaluator.storage.s3_answers import Reply, UnreadableKey, reply_or_raise
from evaluator.storage.s3_client import S3Client
from evaluator.storage.s3_errors import RangeNotSatisfiable, client_error, translate
from tests.conftest import TEST_CREDENTIALS
from tests.support import run
from tests.support.s3server import REGION, MotoS3

Call = Callable[[Any], Awaitable[Any]]
CALLS: dict[str, Call] = {
    "get": lambda store: obstore.get_async(store, "run/a.json"),
    "get missing": lambda store: obstore.get_async(store, "run/missing.json"),
    "head missing": lambda store: obstore.head_async(store, "run/missing.json"),
    "get past the end": lambda store: obstore.get_async(
        store, "run/a.json", options={"range": (10, 20)}
    ),
    "list": lambda store: anext(aiter(obstore.list(store, "run", chunk_size=10))),
}


@dataclass(frozen=True)
class Case:
    call: str
    raised: str  # the type obstore raises
    status: int
    code: str
    shown: type[StorageError]  # what the user gets, once translated
    bucket: str = "ours"  # or "missing"
    signer: str = "anyone"  # "anyone": moto checks nothing; else who signs, and moto checks


CASES = {
    "a missing key": Case("get missing", "FileNotFoundError", 404, "NoSuchKey", ObjectNotFound),
    "a missing key, HEAD": Case("head missing", "FileNotFoundError", 404, "404", ObjectNotFound),
    "a missing bucket": Case(
        "get", "FileNotFoundError", 404, "NoSuchBucket", BucketNotFound, bucket="missing"
    ),
    "a missing bucket, listed": Case(
        "list", "GenericError", 404, "NoSuchBucket", BucketNotFound, bucket="missing"
    ),
    "a range past the end": Case(
        "get past the end", "GenericError", 416, "InvalidRange", RangeNotSatisfiable
    ),
    "an unknown key id": Case(
        "get", "PermissionDeniedError", 403, "InvalidAccessKeyId", StorageError, signer="unknown"
    ),
    "an unknown key id, listed": Case(
        "list", "GenericError", 403, "InvalidAccessKeyId", StorageError, signer="unknown"
    ),
    "a wrong secret": Case(
        "get", "PermissionDeniedError", 403, "SignatureDoesNotMatch", StorageError, signer="wrong"
    ),
    "no permission": Case(
        "get", "PermissionDeniedError", 403, "AccessDenied", AccessDenied, signer="powerless"
    ),
    "no permission, listed": Case(
        "list", "GenericError", 403, "AccessDenied", AccessDenied, signer="powerless"
    ),
}


def _client(bucket: str, endpoint: str) -> S3Client:
    return S3Client.open(
        bucket,
        endpoint_url=endpoint,
        max_connections=2,
        connect_timeout=2.0,
        read_timeout=5.0,
        request_deadline=10.0,
    )


def _failure(client: S3Client, call: str) -> Exception:
    """What obstore raises for ``call`` on the client's store (the one its requests use)."""

    async def attempt() -> Exception:
        try:
            await CALLS[call](client._store)
        except Exception as error:
            return error
        raise AssertionError(f"{call} succeeded")

    return run(attempt())


@pytest.fixture
def bucket(s3_server: MotoS3, s3_bucket: str) -> str:
    s3_server.put_objects(s3_bucket, {"a.json": b"{}"}, prefix="run/")
    return s3_bucket


def _sign_as(signer: str, s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for ``signer``: the suite's (unknown to moto's IAM), or an IAM user with
    no policy, with its own secret or a wrong one."""
    if signer in ("anyone", "unknown"):
        return
    iam = boto3.client("iam", endpoint_url=s3_server.endpoint, region_name=REGION)
    user = f"powerless-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    secret = key["SecretAccessKey"] if signer == "powerless" else "not-the-secret"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_an_error_answer_is_read_by_type_or_text(
    case: Case, bucket: str, s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of S3's refusals reaches the reader as the exception obstore really raises, and is
    read into S3's status and code, then the storage error naming the problem."""
    _sign_as(case.signer, s3_server, monkeypatch)
    client = _client(bucket if case.bucket == "ours" else "no-such-bucket-here", s3_server.endpoint)
    if case.signer == "anyone":
        error = _failure(client, case.call)
    else:
        with enable_iam_authentication():
            error = _failure(client, case.call)
    assert type(error).__name__ == case.raised
    reply = reply_or_raise(error, s3_server.endpoint)
    assert (reply.status, reply.code) == (case.status, case.code)
    assert not reply.ok and bool(reply.message) == (case.code != str(case.status))
    shown = translate(client_error(reply, "GetObject", 0), "s3://b/run/a.json", "b", "s3:GetObject")
    assert type(shown) is case.shown
    for secret in (*TEST_CREDENTIALS.values(), "not-the-secret"):
        assert secret not in f"{reply} {shown}"


@pytest.mark.parametrize("call", ["get", "list"])
def test_a_refused_connection_is_botocores_endpoint_error(call: str) -> None:
    """Nothing listening on the port: obstore's untyped failure becomes botocore's
    ``EndpointConnectionError`` naming the endpoint (which ``s3.py`` retries, then reports)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    error = _failure(_client("any-bucket", endpoint), call)
    assert type(error).__name__ == "GenericError"
    with pytest.raises(EndpointConnectionError, match=endpoint.replace(".", r"\.")):
        reply_or_raise(error, endpoint)


def test_an_unaddressable_listed_key_is_read_as_unreadable_key(
    bucket: str, s3_server: MotoS3
) -> None:
    """A listed key with an empty path segment is obstore's ``InvalidPathError``, read as
    ``UnreadableKey`` naming the key."""
    s3_server.put_objects(bucket, {"odd//key": b"x"}, prefix="run/")
    error = _failure(_client(bucket, s3_server.endpoint), "list")
    assert type(error).__name__ == "InvalidPathError"
    with pytest.raises(UnreadableKey, match="^run/odd//key$"):
        reply_or_raise(error, s3_server.endpoint)


def test_a_typed_failure_needs_no_status_in_its_text() -> None:
    """The type alone gives the status: a ``FileNotFoundError`` or ``PermissionDeniedError``
    whose text has no "status code" (another obstore wording) still reads as 404 / 403."""
    from obstore.exceptions import PermissionDeniedError

    assert reply_or_raise(FileNotFoundError("Object at location k not found"), "e") == Reply(
        404, code="404"
    )
    denied = PermissionDeniedError("lacked the privileges: <Code>AccessDenied</Code>")
    assert (reply_or_raise(denied, "e").status, reply_or_raise(denied, "e").code) == (
        403,
        "AccessDenied",
    )
