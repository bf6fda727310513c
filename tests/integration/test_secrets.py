"""Secrets a user passes as rule parameters reach no output: not the log on stdout, not the
result file, not SageMaker's message file, even when the rule's own exception quotes them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.evaluator_cli import ROOT, EvaluatorCli

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")
PASSWORD, API_KEY, DB_PASSWORD = "hunter2-very-secret", "AKIA-not-for-logs", "PW-in-the-url"

RULES = textwrap.dedent("""
    from smdebug.rules import Rule

    class Rejects(Rule):
        def __init__(self, base_trial, password, api_key, db_url):
            super().__init__(base_trial)
            raise ValueError(f"cannot log in with {password!r}, {api_key} at {db_url}")

        def invoke_at_step(self, step):
            return False

    class FailsLater(Rule):
        def __init__(self, base_trial, password, api_key, db_url):
            super().__init__(base_trial)
            self.secrets = (password, api_key, db_url)

        def invoke_at_step(self, step):
            raise RuntimeError("login failed: " + " ".join(self.secrets))
""")


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


@pytest.mark.parametrize("rule", ["Rejects", "FailsLater"])
def test_secret_parameters_reach_no_output(tmp_path: Path, rules_file: Path, rule: str) -> None:
    """A rule that quotes its password, API key and database URL in an exception (building or
    running) ends exit 2 and none of the three secrets is printed or written."""
    cli = EvaluatorCli(tmp_path)
    run = cli(
        "--trial-dir",
        EXAMPLE,
        "--rule",
        rule,
        "--source_s3_uri",
        str(rules_file),
        "--password",
        PASSWORD,
        "--api_key",
        API_KEY,
        "--db_url",
        f"postgres://user:{DB_PASSWORD}@db.example.com/x",
    )
    assert run.returncode == 2, run.describe()
    outputs = {
        "stdout": run.stdout,
        "stderr": run.stderr,
        "message": run.message or "",
        "result": run.result_path.read_text(),
    }
    for where, text in outputs.items():
        for secret in (PASSWORD, API_KEY, DB_PASSWORD):
            assert secret not in text, f"{secret!r} in {where}"
    assert "postgres://user:***@db.example.com/x" in outputs["result"]
