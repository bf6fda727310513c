"""S3 on obstore with botocore's credentials (issue 27): a profile's ``credential_process``, a
private CA through ``AWS_CA_BUNDLE``, a region named in S3's answer, and a key obstore cannot
address, against moto (or a TLS forwarder in front of it) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from evaluator.errors import StorageError
from evaluator.storage import S3Storage
from tests.conftest import TEST_CREDENTIALS
from tests.support import collect, run, run_with
from tests.support.loop_server import LoopServer, pump, upstream_address
from tests.support.s3server import MotoS3


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 (Python 3.10 too)


@pytest.fixture
def trial(s3_server: MotoS3, s3_bucket: str) -> str:
    """A bucket with two small objects; returns the trial's URI."""
    s3_server.put_objects(s3_bucket, {"a.json": b"{}", "b.json": b"[]"}, prefix="run/")
    return f"s3://{s3_bucket}/run"


def test_a_profile_with_a_credential_process_is_used(
    trial: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no key in the environment, the profile's ``credential_process`` (botocore's chain,
    refreshable credentials with an expiry) signs the requests."""
    answer = {
        "Version": 1,
        "AccessKeyId": TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "SecretAccessKey": TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "Expiration": (_utc_now() + datetime.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
    }
    script = tmp_path / "creds.py"
    script.write_text(f"print({json.dumps(json.dumps(answer))})\n")
    config = tmp_path / "config"
    config.write_text(f"[profile lab]\ncredential_process = {sys.executable} {script}\n")
    for name in TEST_CREDENTIALS:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "lab")
    assert run_with(S3Storage(trial), lambda s: s.read("b.json")) == b"[]"


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate it signed for 127.0.0.1: (ca, cert, key) files."""
    now = _utc_now()
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "evaluator test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class TlsForwarder(LoopServer):
    """HTTPS on 127.0.0.1 in front of the moto server (plain HTTP), in its own thread."""

    def __init__(self, upstream: str, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        super().__init__(context)
        self._upstream = upstream_address(upstream)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        except (OSError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
def tls(s3_server: MotoS3, tmp_path: Path) -> Iterator[tuple[TlsForwarder, Path]]:
    """An HTTPS forwarder to moto whose certificate a private CA signed, and that CA's file."""
    ca, cert, key = _certificates(tmp_path)
    with TlsForwarder(s3_server.endpoint, cert, key) as forwarder:
        yield forwarder, ca


def test_a_private_ca_from_aws_ca_bundle_is_trusted(
    trial: str, tls: tuple[TlsForwarder, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An https endpoint signed by a private CA is read when ``AWS_CA_BUNDLE`` names that CA,
    and refused (a clear error, not a hang) when it does not."""
    forwarder, ca = tls
    short = {"connect_timeout": 1.0, "read_timeout": 1.0, "request_deadline": 2.0}
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    with pytest.raises(StorageError, match="cannot reach S3") as refused:
        run_with(
            S3Storage(trial, endpoint_url=forwarder.endpoint, **short), lambda s: s.read("a.json")
        )
    assert forwarder.endpoint in str(refused.value)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(ca))
    storage = S3Storage(trial, endpoint_url=forwarder.endpoint, **short)
    assert run_with(storage, lambda s: s.read("a.json")) == b"{}"


def test_a_key_obstore_cannot_address_is_named(s3_server: MotoS3, s3_bucket: str) -> None:
    """A listing that meets a key with an empty path segment fails with a StorageError that
    names the key and what to do, instead of an error from inside the client."""
    s3_server.put_objects(s3_bucket, {"a.json": b"{}", "odd//key": b"x"}, prefix="run/")
    with pytest.raises(StorageError, match="move or rename it") as error:
        run_with(S3Storage(f"s3://{s3_bucket}/run"), lambda s: collect(s, ""))
    assert "run/odd//key" in str(error.value)


async def _region_in_body_server(seen: list[str]) -> asyncio.Server:
    """Answers 400 AuthorizationHeaderMalformed naming eu-west-1 in the body (what S3's global
    endpoint says) unless the request is signed for eu-west-1."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                seen.append(head)
                if "/eu-west-1/s3/aws4_request" in head:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata")
                else:
                    body = (
                        b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
                        b"'us-east-1' is wrong; expecting 'eu-west-1'</Message>"
                        b"<Region>eu-west-1</Region></Error>"
                    )
                    writer.write(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_a_region_named_in_the_answer_is_followed_without_asking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S3's 400 naming the bucket's region in its body is followed at once: two requests, the
    second signed for that region, and no question to S3 about where the bucket is."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    seen: list[str] = []

    async def body() -> tuple[bytes, dict[str, int]]:
        server = await _region_in_body_server(seen)
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
    assert data == b"data" and counts == {"GetObject": 2}
    assert len(seen) == 2 and "/us-east-1/s3/" in seen[0] and "/eu-west-1/s3/" in seen[1]
