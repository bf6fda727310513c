"""The commands the user docs give, read from the docs themselves, so that tests run exactly
what a user would copy."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "doc_block_after", "documented_build_command"]

ROOT = Path(__file__).resolve().parents[2]


def documented_build_command() -> str:
    """The plain ``docker build`` command of docs/container.md's "Building" section, one line."""
    text = (ROOT / "docs" / "container.md").read_text(encoding="utf-8")
    block = text.split("## Building", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    command = block.split("# or plainly", 1)[1] if "# or plainly" in block else block
    return command.replace("\\\n", " ").strip()


def doc_block_after(doc: str, marker: str) -> str:
    """The first fenced code block of the doc ``doc`` (a path from the repository root) after
    the line holding ``marker``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    after = text.split(marker, 1)[1]
    return after.split("```", 2)[1].split("\n", 1)[1]
