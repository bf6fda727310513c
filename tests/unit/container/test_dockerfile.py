"""The Dockerfile's label defaults and the build command the docs give: a plain ``docker build``
labels the image with the project's real version, and the documented command passes every
label argument the Dockerfile cannot know by itself."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.support.docs import documented_build_command

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _arg_defaults() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(.*)$", DOCKERFILE, flags=re.M))


def test_version_label_default_is_the_projects_version() -> None:
    """ARG VERSION's default is pyproject.toml's version, so a plain docker build labels it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert _arg_defaults()["VERSION"] == project["project"]["version"]


def test_documented_build_passes_what_the_dockerfile_cannot_know() -> None:
    """The docs' docker build command passes REVISION and CREATED, whose defaults are only
    placeholders."""
    placeholders = [k for k, v in _arg_defaults().items() if v in ("unknown", "")]
    assert set(placeholders) >= {"REVISION", "CREATED"}
    command = documented_build_command()
    assert command.startswith("docker build -t debugger-rule-evaluator")
    for name in placeholders:
        assert f"--build-arg {name}=" in command, name
