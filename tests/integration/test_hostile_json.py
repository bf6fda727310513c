"""JSON nested deeper than Python's parser can follow is bad input (exit 2), not our bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.errors import ConfigurationError, SMDebugValueError
from evaluator.formats.collections_file import parse_collections_file
from evaluator.rules.actions import parse_action_json
from tests.support.evaluator_cli import ROOT, EvaluatorCli

DEEP = "[" * 100_000 + "]" * 100_000
EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")


def test_a_deeply_nested_config_file_is_a_client_error(tmp_path: Path) -> None:
    """--config holding 100,000 nested lists ends in exit 2 saying it is nested too deeply."""
    config = tmp_path / "rules.json"
    config.write_text(DEEP)
    run = EvaluatorCli(tmp_path)("--trial-dir", EXAMPLE, "--config", str(config))
    assert run.returncode == 2, run.describe()
    assert "nested too deeply" in (run.message or "")


def test_a_deeply_nested_collections_file_is_refused() -> None:
    """A collections file nested 100,000 deep is a SMDebugValueError, not a RecursionError."""
    with pytest.raises(SMDebugValueError, match="nested too deeply"):
        parse_collections_file(DEEP.encode())


def test_deeply_nested_action_json_is_refused() -> None:
    """action_json nested 100,000 deep is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="nested too deeply"):
        parse_action_json(DEEP)
