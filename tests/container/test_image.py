"""The built image: its entrypoint, user, labels, pinned packages, size, and what it leaves out."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from importlib.metadata import entry_points, version

import pytest

from tests.container.harness import ROOT, SIZE_TARGET_MB, Docker, Image
from tests.support.docs import documented_build_command

pytestmark = pytest.mark.container

ENTRYPOINT = ["/opt/venv/bin/rule-evaluator"]
NAME = "debugger-rule-evaluator"
VERSION = version(NAME)  # of this checkout, installed in the test environment
CONSOLE_SCRIPT = entry_points(group="console_scripts")["rule-evaluator"].value


def _python(docker: Docker, image: Image, code: str) -> str:
    return docker("run", "--rm", "--entrypoint", "python", image.name, "-c", code).stdout


def test_entrypoint_is_the_rule_evaluator_command_in_exec_form(image: Image) -> None:
    """ENTRYPOINT is the console script in exec form (signals reach it), with no CMD."""
    config = image.config["Config"]
    assert config["Entrypoint"] == ENTRYPOINT
    assert not config.get("Cmd")


def test_console_script_runs_the_same_code_as_the_plain_command(
    docker: Docker, image: Image
) -> None:
    """The image's rule-evaluator is the project's console script: container.cli:main."""
    code = (
        "from importlib.metadata import entry_points\n"
        "print(entry_points(group='console_scripts')['rule-evaluator'].value)"
    )
    assert _python(docker, image, code).strip() == CONSOLE_SCRIPT
    shebang = docker("run", "--rm", "--entrypoint", "head", image.name, "-n1", ENTRYPOINT[0])
    assert shebang.stdout.strip() == "#!/opt/venv/bin/python"


def test_evaluation_runs_as_a_fixed_non_root_user(image: Image) -> None:
    """The image starts as root (SageMaker's /opt/ml folders are root's) and names the numeric
    non-root uid:gid the evaluation switches to (EVALUATOR_RUN_AS); test_supervision runs it."""
    env = dict(item.partition("=")[::2] for item in image.config["Config"]["Env"])
    uid, _, gid = env["EVALUATOR_RUN_AS"].partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0 and int(gid) != 0, env
    assert image.config["Config"]["User"] in ("0:0", "0", "root", "")


def test_oci_labels(image: Image) -> None:
    """The OCI labels name the project, its version, revision, build time, licence and base."""
    _assert_oci_labels(image.config["Config"]["Labels"])


@pytest.mark.slow
def test_the_documented_docker_build_labels_the_image_right(docker: Docker, image: Image) -> None:
    """docs/container.md's plain docker build command (run as written, under a tag of its own)
    gives an image with the same right OCI labels as build_image.sh."""
    command = documented_build_command()
    assert command.startswith(f"docker build -t {NAME} ")
    tag = f"{NAME}:docs-build-test"
    command = command.replace(f"-t {NAME} ", f"-t {tag} ", 1)
    done = subprocess.run(
        ["sh", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_oci_labels(docker.image_config(tag)["Config"]["Labels"])


def _assert_oci_labels(labels: dict[str, str]) -> None:
    assert labels["org.opencontainers.image.title"] == NAME
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.revision"]  # "unknown" outside a git checkout
    for key in ("created", "base.name", "description"):
        assert labels[f"org.opencontainers.image.{key}"] not in ("", "unknown"), key


def test_nothing_is_shipped_under_opt_ml(docker: Docker, image: Image) -> None:
    """/opt/ml is SageMaker's: the image has nothing there."""
    assert docker(
        "run", "--rm", "--entrypoint", "ls", image.name, "/opt", check=False
    ).stdout.split() == ["venv"]


def test_installed_packages_are_the_pinned_versions(docker: Docker, image: Image) -> None:
    """Every package in the image's venv is the version container/docker/constraints.txt pins,
    and nothing else is there (no pip, no setuptools)."""
    pins = {}
    for line in (ROOT / "container" / "docker" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name] = version
    code = (
        "import json, sys\nfrom importlib.metadata import distributions\n"
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version "
        "for d in distributions(path=[p for p in sys.path if 'site-packages' in p])}))"
    )
    installed = json.loads(_python(docker, image, code))
    own = installed.pop(NAME)
    assert own == VERSION
    assert {name: pins.get(name) for name in installed} == installed
    assert "pip" not in installed and "setuptools" not in installed


def test_image_size_is_under_target(
    image: Image, record_property: Callable[[str, object], None]
) -> None:
    """The image stays under the size target (also printed at the end of the run)."""
    record_property("image_size_mb", round(image.size_mb))
    assert image.size_mb < SIZE_TARGET_MB


def test_help_exits_zero(docker: Docker, image: Image) -> None:
    """`docker run IMAGE --help` prints the command's help and exits 0."""
    done = docker("run", "--rm", image.name, "--help")
    assert "rule-evaluator" in done.stdout and "Exit codes" in done.stdout
