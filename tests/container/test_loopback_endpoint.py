"""In a container, a loopback S3 endpoint (the docs' ``http://127.0.0.1:5000`` for moto) is the
container itself: the run fails within seconds saying so, and how to reach the host instead
(issue 26, friction 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.harness import Docker, Image, Layout

pytestmark = pytest.mark.container


def test_loopback_endpoint_in_a_container_is_explained(
    docker: Docker, image: Image, tmp_path: Path
) -> None:
    """docker run with AWS_ENDPOINT_URL=http://127.0.0.1:PORT ends in exit 2 whose message
    names the endpoint, says 127.0.0.1 is the container itself, and offers --network host and
    host.docker.internal."""
    layout = Layout(tmp_path)
    outcome = docker.run(
        image.name,
        layout,
        env={
            "base_trial": "s3://ci-bucket/job/debug-output",
            "rule_to_invoke": "VanishingGradient",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        },
    )
    assert outcome.returncode == 2, outcome.describe()
    message = outcome.message or ""
    assert "cannot reach S3 at http://127.0.0.1:5000" in message, outcome.describe()
    assert "the container itself" in message and "--network host" in message
    assert "http://host.docker.internal:5000" in message
