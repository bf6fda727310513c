"""Why an S3 endpoint could not be reached, in words, and the container hint for a loopback
endpoint (issue 26, friction 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

from evaluator.storage import s3_reach


def test_refused_connection_is_named() -> None:
    """A refused connection says nothing listens there."""
    error = EndpointConnectionError(
        endpoint_url="http://127.0.0.1:5000/b",
        error=ConnectionRefusedError(111, "[Errno 111] Connect call failed ('127.0.0.1', 5000)"),
    )
    assert "connection refused" in s3_reach.unreachable_reason(error)


def test_unresolvable_host_and_connect_timeout_are_named() -> None:
    """A host name that does not resolve and a connect timeout each get their own words."""
    dns = EndpointConnectionError(
        endpoint_url="http://minio:9000/b", error=OSError("[Errno -2] Name or service not known")
    )
    assert s3_reach.unreachable_reason(dns) == "the host name does not resolve"
    timeout = ConnectTimeoutError(endpoint_url="http://10.0.0.5:9000/b")
    assert "connect timeout" in s3_reach.unreachable_reason(timeout)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.53", "[::1]"])
def test_loopback_endpoint_in_a_container_gets_the_host_hint(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a container a loopback endpoint is explained, with host.docker.internal and the
    port the user gave."""
    marker = tmp_path / ".dockerenv"
    marker.write_text("")
    monkeypatch.setattr(s3_reach, "container_markers", (str(marker),))
    hint = s3_reach.loopback_hint(f"http://{host}:5000")
    assert "the container itself" in hint and "--network host" in hint
    assert "http://host.docker.internal:5000" in hint


def test_no_hint_outside_a_container_or_for_a_real_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a container, or for an endpoint that is not loopback, there is no hint."""
    monkeypatch.setattr(s3_reach, "_in_container", lambda: False)
    assert s3_reach.loopback_hint("http://127.0.0.1:5000") == ""
    monkeypatch.setattr(s3_reach, "_in_container", lambda: True)
    assert s3_reach.loopback_hint("https://s3.us-west-2.amazonaws.com") == ""
