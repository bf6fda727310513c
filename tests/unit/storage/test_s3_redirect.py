"""A bucket in another region than the one configured: S3 says where (``x-amz-bucket-region``),
and the request is signed again for that region, once, as botocore's redirector does.

obstore (the S3 client) drops the headers and body of a 301 without ``Location``, so the
storage asks the bucket's region with one unsigned HEAD before signing again: three requests
where the hand-written client made two (docs/s3.md, region redirects)."""

from __future__ import annotations

import asyncio

import pytest

from evaluator.errors import StorageError
from evaluator.storage import S3Storage
from tests.support import run


async def _region_server(seen: list[str], *, always_redirect: bool = False) -> asyncio.Server:
    """Answers 301 naming eu-west-1 unless the request is signed for eu-west-1."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                seen.append(head)
                if "/eu-west-1/s3/aws4_request" in head and not always_redirect:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata")
                else:
                    body = (
                        b"<Error><Code>PermanentRedirect</Code><Message>The bucket is in "
                        b"this region: eu-west-1.</Message></Error>"
                    )
                    writer.write(
                        b"HTTP/1.1 301 Moved Permanently\r\nx-amz-bucket-region: eu-west-1\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Static credentials, us-east-1 configured, no profile or endpoint variables."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def test_a_region_redirect_is_followed_once_signed_for_that_region() -> None:
    """A 301 is answered by asking the bucket's region once (HEAD) and signing for it; the
    object arrives, and every request is counted."""
    seen: list[str] = []

    async def body() -> tuple[bytes, dict[str, int]]:
        server = await _region_server(seen)
        port = server.sockets[0].getsockname()[1]
        storage = S3Storage(
            "s3://bkt/t", endpoint_url=f"http://127.0.0.1:{port}", count_requests=True
        )
        try:
            return await storage.read("k.json"), dict(storage.request_counts)
        finally:
            await storage.aclose()
            server.close()

    data, counts = run(body())
    assert data == b"data" and counts == {"GetObject": 2, "HeadBucket": 1}
    assert seen[0].startswith("GET ") and "/us-east-1/s3/" in seen[0]
    assert seen[1].startswith("HEAD ")
    assert seen[2].startswith("GET ") and "/eu-west-1/s3/" in seen[2]


def test_a_redirect_that_repeats_is_an_error_not_a_loop() -> None:
    """A server that keeps redirecting ends in a StorageError naming S3's answer."""
    seen: list[str] = []

    async def body() -> bytes:
        server = await _region_server(seen, always_redirect=True)
        port = server.sockets[0].getsockname()[1]
        storage = S3Storage("s3://bkt/t", endpoint_url=f"http://127.0.0.1:{port}")
        try:
            return await storage.read("k.json")
        finally:
            await storage.aclose()
            server.close()

    with pytest.raises(StorageError, match="PermanentRedirect"):
        run(body())
    assert len(seen) == 3  # the GET, the region's HEAD, the GET signed for it: no loop
