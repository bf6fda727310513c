"""Shared fixtures: a moto S3 server on 127.0.0.1 for the whole session, a fresh bucket per test.
And the run's closing banner (tests/support/run_banner.py), printed by the process that prints
the summary: the only one, or pytest-xdist's controller, which gathers its workers' lines.
Tests marked ``slow`` are skipped unless ``--run-slow`` is given, ``CI=true`` is set (.ci/run) or
``-m`` selects by marker (``-m slow`` runs only them): docs/development.md."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.support import run_banner
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="run the tests marked slow too (the default with CI=true or with -m)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a slow test first, so that under pytest-xdist (whole files to one
    process, in this order) the longest ones start early instead of ending the run alone.
    Then skip the tests marked slow, saying how to run them, unless they were asked for."""
    heavy = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in heavy)  # stable: the order within stays
    if (
        config.getoption("--run-slow")
        or os.environ.get("CI", "").lower() == "true"
        or config.getoption("markexpr")
    ):
        return
    skip = pytest.mark.skip(reason="marked slow: run with --run-slow (CI=true runs them)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    run_banner.hand_over(session.config)  # an xdist worker's lines go to the controller


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, in its controller
def pytest_testnodedown(node: object, error: object) -> None:
    run_banner.gather(node)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The container image's size and build time, or why the container tests did not run."""
    lines = run_banner.lines()
    if not lines:
        return
    skipped = any(line.startswith("CONTAINER TESTS SKIPPED") for line in lines)
    terminalreporter.section(
        "container image", sep="!" if skipped else "-", yellow=skipped, bold=skipped
    )
    for line in lines:
        terminalreporter.line(line, yellow=line.startswith("CONTAINER TESTS SKIPPED"))
