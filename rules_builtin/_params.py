"""Parsing the string parameters SageMaker sends, with errors that name the parameter."""

from __future__ import annotations

from evaluator.errors import ConfigurationError

__all__ = ["parse_float"]


def parse_float(rule: str, name: str, value: object) -> float:
    """``float(value)``; a ConfigurationError naming the rule, parameter and value if it isn't."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigurationError(
            f"{rule} parameter {name} must be a number, got {value!r}"
        ) from None
