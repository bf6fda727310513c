"""evaluator.status: the names it has always offered, and one-way imports between its modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import evaluator.status as status
from evaluator.errors import ExitCode
from evaluator.reporting import StatusReporter

PACKAGE = Path(status.__file__).parent


def test_every_public_name_exists() -> None:
    """Each name of __all__ is there, including those imported before the package split."""
    for name in status.__all__:
        assert hasattr(status, name), name
    assert set(status.__all__) >= {
        "EXIT_CLIENT_ERROR",
        "EXIT_INTERNAL_ERROR",
        "EXIT_ISSUES_FOUND",
        "EXIT_NO_ISSUES",
        "EXIT_SIGINT",
        "EXIT_SIGTERM",
        "MESSAGE_LIMIT",
        "RESULT_FILE_NAME",
        "STOPPED_MESSAGE",
        "ExitCode",
        "RuleOutcome",
        "RuleStatus",
        "client_error_message",
        "combined_message",
        "condition_met_message",
        "configure_logging",
        "internal_error_message",
        "overall_exit_code",
        "overall_status",
        "truncate_utf8",
        "write_status_files",
    }


def test_the_reporters_old_name_still_works_with_a_warning() -> None:
    """``evaluator.status.StatusReporter`` (before the reporter moved to evaluator.reporting) is
    the same class, and saying so warns that the name goes away."""
    with pytest.warns(DeprecationWarning, match="evaluator.reporting"):
        assert status.StatusReporter is StatusReporter
    assert "StatusReporter" not in status.__all__


def test_the_vocabulary_loads_without_the_sinks_or_the_reporter() -> None:
    """Importing evaluator.status (what the supervisor does to write its last word) loads
    neither the outputs of a run nor the reporter above them."""
    code = (
        "import sys, evaluator.status; "
        "print(sorted(m for m in sys.modules if m.startswith(('evaluator.sinks', "
        "'evaluator.reporting', 'evaluator.config', 'structlog'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def test_exit_names_are_the_exit_code_members() -> None:
    """The EXIT_* names are ExitCode's members, not a second set of numbers."""
    assert [
        status.EXIT_NO_ISSUES,
        status.EXIT_ISSUES_FOUND,
        status.EXIT_CLIENT_ERROR,
        status.EXIT_INTERNAL_ERROR,
        status.EXIT_SIGINT,
        status.EXIT_SIGTERM,
    ] == list(ExitCode)


def _siblings_imported(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    return {
        node.module.rsplit(".", 1)[1]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("evaluator.status.")
    }


def test_modules_import_one_way() -> None:
    """outcome < files < resume, final; logging stands alone."""
    assert _siblings_imported("outcome") == set()
    assert _siblings_imported("logging") == set()
    assert _siblings_imported("files") == {"outcome"}
    assert _siblings_imported("resume") == {"files", "outcome"}
    assert _siblings_imported("final") == {"files", "outcome"}
