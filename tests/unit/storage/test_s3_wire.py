"""The lean S3 wire without a server: our SigV4 equals botocore's, listings and errors parse as
botocore reads them, and the bucket's URL comes from botocore's endpoint rules."""

from __future__ import annotations

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from evaluator.storage import s3_wire
from evaluator.storage.s3_wire import S3Wire, _parse_error, _resolve, parse_listing

ENDPOINT = "http://127.0.0.1:9000"
CREDENTIALS = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)
TEMPORARY = ReadOnlyCredentials("AKIDEXAMPLE", "secret", "session-token/with+odd=chars")


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> S3Wire:
    """A wire for bucket ``bkt`` at a local endpoint; nothing is sent."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    target = _resolve("bkt", ENDPOINT, "eu-west-1")
    return S3Wire("bkt", target, None, endpoint_url=ENDPOINT, max_connections=1)


def _botocore_authorization(
    url: str, credentials: ReadOnlyCredentials, headers: dict[str, str]
) -> tuple[str, str]:
    request = AWSRequest(method="GET", url=url, headers=dict(headers))
    S3SigV4Auth(credentials, "s3", "eu-west-1").add_auth(request)
    return request.headers["Authorization"], request.headers["X-Amz-Date"]


@pytest.mark.parametrize("credentials", [CREDENTIALS, TEMPORARY], ids=["static", "session"])
@pytest.mark.parametrize(
    ("key", "query", "range_header"),
    [
        ("index/000000000/000000000007_worker_0.json", "", None),
        ("events/a b+c~d/é.tfevents", "", "bytes=100-2099"),
        ("", "encoding-type=url&list-type=2&max-keys=1000&prefix=run%2Findex%2F", None),
    ],
)
def test_our_signature_is_botocores(
    wire: S3Wire,
    monkeypatch: pytest.MonkeyPatch,
    credentials: ReadOnlyCredentials,
    key: str,
    query: str,
    range_header: str | None,
) -> None:
    """For GETs, ranged GETs and listings, with and without a session token, our Authorization
    header is the one botocore's S3 signer computes for the same request and second."""
    path = "/bkt" if query else "/bkt/" + s3_wire._quote_key(key)
    url = ENDPOINT + path + (f"?{query}" if query else "")
    extra = {"Range": range_header} if range_header else {}
    expected, stamp = _botocore_authorization(url, credentials, extra)
    monkeypatch.setattr(s3_wire, "_timestamp", lambda: stamp)
    headers = wire._sign(credentials, "GET", path, query, range_header)
    assert headers["authorization"] == expected
    assert headers["host"] == "127.0.0.1:9000" and headers["x-amz-date"] == stamp


def test_the_bucket_url_comes_from_botocores_endpoint_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without an endpoint override the bucket is addressed as botocore addresses it (virtual
    host on AWS, the region's endpoint, https); with one, path style at that endpoint."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    aws = _resolve("my-bucket", None, "eu-west-1")
    assert aws.object_base == "https://my-bucket.s3.eu-west-1.amazonaws.com/"
    assert (aws.scheme, aws.port, aws.region, aws.host) == (
        "https",
        443,
        "eu-west-1",
        "my-bucket.s3.eu-west-1.amazonaws.com",
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://localhost:4566")
    local = _resolve("my-bucket", None, "us-east-1")
    assert local.object_base == "http://localhost:4566/my-bucket/"
    assert (local.list_path, local.host, local.port) == ("/my-bucket", "localhost:4566", 4566)


def test_a_listing_decodes_keys_and_reads_the_next_token() -> None:
    """URL-encoded keys come back decoded (only when the answer says they are, as botocore
    decides), sizes as ints, and the token only when truncated."""
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<IsTruncated>true</IsTruncated><NextContinuationToken>tok==</NextContinuationToken>"
        b"<EncodingType>url</EncodingType>"
        b"<Contents><Key>run/a+b%2Bc%C3%A9.json</Key><ETag>&quot;x&quot;</ETag>"
        b"<Size>12</Size></Contents>"
        b"<Contents><Key>run/z</Key><Size>0</Size></Contents></ListBucketResult>"
    )
    page = parse_listing(body)
    assert [(o.key, o.size) for o in page.objects] == [("run/a b+cé.json", 12), ("run/z", 0)]
    assert page.next_token == "tok=="
    done = parse_listing(body.replace(b"<IsTruncated>true", b"<IsTruncated>false"))
    assert done.next_token is None
    plain = parse_listing(body.replace(b"<EncodingType>url</EncodingType>", b""))
    assert plain.objects[0].key == "run/a+b%2Bc%C3%A9.json"  # not URL-encoded: taken as is


def test_error_answers_take_botocores_shape() -> None:
    """An XML error gives its code and message; a body-less answer (HEAD) its status as code."""
    xml = b"<Error><Code>NoSuchKey</Code><Message>The key does not exist</Message></Error>"
    assert _parse_error(404, xml)["Error"] == {
        "Code": "NoSuchKey",
        "Message": "The key does not exist",
    }
    assert _parse_error(403, b"")["Error"]["Code"] == "403"
    assert _parse_error(503, b"<html>busy</html")["Error"]["Code"] == "503"


def test_an_empty_listing_needs_no_xml_tree_and_equals_the_parsed_one() -> None:
    """An idle poll's empty answer gives no objects and no token, as the full parse does."""
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>"
    )
    page = parse_listing(body)
    assert (page.objects, page.next_token) == ([], None)


@pytest.mark.parametrize("text", ["cpu/index/000000000/x_worker_0.json", "a b+c", "é~-_.", ""])
def test_query_values_are_encoded_as_sigv4_wants(text: str) -> None:
    """The shortcut for plain keys encodes exactly as ``quote(safe='-_.~')``."""
    from urllib.parse import quote

    assert s3_wire._query_quote(text) == quote(text, safe="-_.~")
