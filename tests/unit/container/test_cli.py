"""The command in one process (`container.cli.run`, what the supervised child runs): our own
bugs exit 3, never 1 (which means "fired")."""

from __future__ import annotations

from pathlib import Path

import pytest

import container.cli as cli


def test_unexpected_exception_is_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug of ours ends with exit 3 and SageMaker's InternalServerError text in the files."""
    (tmp_path / "output").mkdir()
    monkeypatch.setenv("EVALUATOR_OPT_ML", str(tmp_path))

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "evaluate", broken)
    assert cli.run(["--rule", "VanishingGradient"]) == 3
    assert (
        tmp_path / "output" / "message"
    ).read_text() == "InternalServerError: RuntimeError: boom"
    assert "InternalServerError: RuntimeError: boom" in capsys.readouterr().err


def test_help_prints_usage_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help describes the command and its exit codes."""
    assert cli.run(["--help"]) == 0
    assert "Exit codes" in capsys.readouterr().out
