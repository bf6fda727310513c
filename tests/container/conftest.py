"""Fixtures of the container tests: a Docker engine, the image, and a moto S3 server that
containers reach over the Docker bridge.

Docker is found as the ``docker`` command finds it: ``DOCKER_HOST``, else the default socket
(or the current docker context). Without an engine the tests skip, loudly: the reason is in
the skip summary and in a banner at the end of the run. With ``CI=true`` or
``EVALUATOR_REQUIRE_DOCKER=1`` they fail instead, so CI cannot pass without running them.

``EVALUATOR_IMAGE`` names an image to test as it is; otherwise the session builds one with
``container/docker/build_image.sh`` (which makes a stand-in base image where no registry is
reachable; Docker's build cache makes later builds quick).
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.container.harness import (
    ROOT,
    S3_CREDENTIALS,
    SIZE_TARGET_MB,
    Docker,
    DockerUnavailable,
    Image,
)
from tests.support import run_banner

REQUIRED = (
    os.environ.get("CI", "").lower() == "true"
    or os.environ.get("EVALUATOR_REQUIRE_DOCKER", "") == "1"
)
DEFAULT_TAG = "debugger-rule-evaluator:latest"
BUILD_TIMEOUT = 30 * 60


def _unavailable(reason: str) -> None:
    """Skip (loudly), or fail where Docker is required."""
    if REQUIRED:
        pytest.fail(
            f"Docker is required here (CI=true or EVALUATOR_REQUIRE_DOCKER=1) but {reason}",
            pytrace=False,
        )
    reason = reason if reason.endswith((".", "?", "!")) else reason + "."
    text = (
        f"CONTAINER TESTS SKIPPED: {reason} Start a Docker engine (docs/container.md) to "
        "run them; EVALUATOR_REQUIRE_DOCKER=1 makes this an error."
    )
    run_banner.add(text)
    pytest.skip(text)


@pytest.fixture(scope="session")
def docker() -> Docker:
    """The docker command, with an engine that answers."""
    try:
        return Docker()
    except DockerUnavailable as e:
        _unavailable(str(e))
        raise  # not reached


def _build_once(name: str, factory: pytest.TempPathFactory) -> float:
    """Build the image with ``build_image.sh`` once per run: pytest-xdist's workers share the
    folder above their temporary folders, where the first one builds under a lock while the
    others wait, then read its outcome (seconds, or the failure). Returns the build's seconds."""
    shared = factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    folder = shared or factory.getbasetemp()
    with (folder / "image-build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        outcome = folder / "image-build.outcome"
        if not outcome.exists():
            outcome.write_text(_build(name, factory.mktemp("image-build") / "build.log"))
        text = outcome.read_text()
    if not text.startswith("built "):
        pytest.fail(text, pytrace=False)
    return float(text.split()[1])


def _build(name: str, log: Path) -> str:
    """Run the build; ``built SECONDS``, or why it failed with the log's tail."""
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            [str(ROOT / "container" / "docker" / "build_image.sh"), "--tag", name],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            timeout=BUILD_TIMEOUT,
        )
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-60:])
        return f"building the image failed (exit {done.returncode}; log {log}):\n{tail}"
    return f"built {time.monotonic() - start}"


@pytest.fixture(scope="session")
def image(docker: Docker, tmp_path_factory: pytest.TempPathFactory) -> Image:
    """The image under test: ``EVALUATOR_IMAGE``, or one built from this checkout."""
    name = os.environ.get("EVALUATOR_IMAGE", "").strip()
    seconds = None
    if name:
        if docker("image", "inspect", name, check=False).returncode != 0:
            pytest.fail(f"EVALUATOR_IMAGE={name} is not an image the engine has", pytrace=False)
    else:
        name = DEFAULT_TAG
        seconds = _build_once(name, tmp_path_factory)
    built = Image(name, docker.image_config(name), seconds)
    built_text = f", built in {seconds:.0f} s" if seconds is not None else ""
    run_banner.add(
        f"image {name}: {built.size_mb:.0f} MB (target under {SIZE_TARGET_MB} MB)"
        f"{built_text}; engine {docker.server_version} at {docker.where}"
    )
    return built


@pytest.fixture(scope="session")
def bridge_address(docker: Docker, image: Image) -> str:
    """This machine's address on the containers' default network (the bridge gateway), as
    the containers see it; a local address, so traffic to it never leaves the machine."""
    probe = (
        "lines = open('/proc/net/route').read().splitlines()[1:]\n"
        "gw = next(l.split()[2] for l in lines if l.split()[1] == '00000000')\n"
        "print('.'.join(str(int(gw[i:i + 2], 16)) for i in (6, 4, 2, 0)))"
    )
    done = docker("run", "--rm", "--entrypoint", "python", image.name, "-c", probe, check=False)
    address = done.stdout.strip()
    if done.returncode != 0 or not address:
        _unavailable(f"the containers' gateway address could not be found: {done.stderr}")
    try:  # only an address of this machine can be bound
        with socket.socket() as s:
            s.bind((address, 0))
    except OSError as e:
        _unavailable(
            f"the bridge gateway {address} is not an address of this machine ({e}); "
            "the engine is remote"
        )
    return address


@pytest.fixture(scope="session")
def bridge_s3(bridge_address: str) -> Iterator[Any]:
    """A moto S3 server on the bridge address, reachable from containers and from here."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    from tests.support.s3server import MotoS3

    server = ThreadedMotoServer(ip_address=bridge_address, port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as patch:  # this process's boto3 (filling buckets)
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL_S3"):
            patch.delenv(name, raising=False)
        for name, value in {
            **S3_CREDENTIALS,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }.items():
            patch.setenv(name, value)
        yield MotoS3(endpoint=f"http://{host}:{port}", server=server)
    server.stop()
