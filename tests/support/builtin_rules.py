"""Build a built-in rule as the evaluator does with no RuleParameters: its defaults, and an
``output_dir`` when the rule writes files (the report rules)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from evaluator.rules.loader import build_rule
from rules_builtin import registry

__all__ = ["build_default"]


def build_default(rule: str, trial: Any, out: Path) -> Any:
    """The built-in ``rule`` on ``trial`` with default parameters, writing under ``out``;
    raises ``ConfigurationError`` when it cannot run on defaults alone."""
    cls = registry.lookup(rule)
    assert cls is not None, f"no built-in rule {rule}"
    params: dict[str, str] = {}
    if "output_dir" in inspect.signature(cls.__init__).parameters:
        params["output_dir"] = str(out)
    return build_rule(cls, trial, params)
