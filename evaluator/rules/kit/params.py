"""Parsing the string parameters SageMaker sends, with errors that name the parameter.

Every built-in rule parses its constructor arguments through these functions, so a bad value
always ends in the same kind of ``ConfigurationError``: "<Rule> parameter <name> must be …,
got '<value>'".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evaluator.config.values import as_bool
from evaluator.errors import ConfigurationError, SMDebugValueError
from evaluator.modes import ModeKeys
from evaluator.trial.patterns import NamePattern, compile_pattern

__all__ = [
    "Param",
    "parse_bool",
    "parse_float",
    "parse_int",
    "parse_list",
    "parse_mode",
    "parse_optional_float",
    "parse_optional_int",
    "parse_regex",
]


@dataclass(frozen=True)
class Param:
    """One documented rule parameter. Each built-in rule lists its own in ``PARAMETERS``;
    docs/rules.md is generated from them (tools/gen_rules_doc.py)."""

    name: str
    default: str | None  # as the string SageMaker would send; None means "not set"
    kind: str  # "float", "int", "bool", "str", "list" (comma-separated), "mode", "trials"
    doc: str
    required: bool = False


def _error(rule: str, name: str, expected: str, value: object) -> ConfigurationError:
    return ConfigurationError(f"{rule} parameter {name} must be {expected}, got {value!r}")


def parse_float(rule: str, name: str, value: object, *, minimum: float | None = None) -> float:
    """``float(value)``, at least ``minimum`` when given; a ConfigurationError naming the rule,
    parameter and value if it isn't."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise _error(rule, name, "a number", value) from None
    if minimum is not None and not number >= minimum:
        raise _error(rule, name, f"a number >= {minimum:g}", value)
    return number


def parse_optional_float(rule: str, name: str, value: object) -> float | None:
    """None for None / "" / "none" / "null"; else ``parse_float``."""
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    return parse_float(rule, name, value)


def parse_int(rule: str, name: str, value: object, *, minimum: int | None = None) -> int:
    """A whole number (``"10"``, ``"10.0"``); at least ``minimum`` when given."""
    if isinstance(value, bool):
        raise _error(rule, name, "a whole number", value)
    try:
        number = float(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise _error(rule, name, "a whole number", value) from None
    if number != int(number):
        raise _error(rule, name, "a whole number", value)
    if minimum is not None and number < minimum:
        raise _error(rule, name, f"a whole number >= {minimum}", value)
    return int(number)


def parse_optional_int(
    rule: str, name: str, value: object, *, minimum: int | None = None
) -> int | None:
    """None for None / "" / "none" / "null"; else ``parse_int``."""
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    return parse_int(rule, name, value, minimum=minimum)


def parse_regex(rule: str, name: str, value: object) -> NamePattern:
    """A non-empty regular expression (an empty one would match every tensor), matched in
    linear time where RE2 can (``evaluator.trial.patterns``); ``search``/``pattern`` as
    ``re.Pattern``'s."""
    text = "" if value is None else str(value).strip()
    if not text:
        raise ConfigurationError(
            f"{rule} parameter {name} must be a regular expression, got "
            f"{value!r} (an empty one would match every tensor)"
        )
    try:
        return compile_pattern(text, what=f"{rule} parameter {name}")
    except re.error as e:
        raise ConfigurationError(
            f"{rule} parameter {name} must be a regular expression, got {value!r}: {e}"
        ) from None
    except SMDebugValueError as e:  # longer than max_regex_length
        raise ConfigurationError(str(e)) from None


def parse_bool(rule: str, name: str, value: object) -> bool:
    """``True``/``False`` from a bool or the words evaluator settings accept
    (``evaluator.config.values.as_bool``: true/false, 1/0, yes/no, y/n, on/off, any case)."""
    result = as_bool(value)
    if result is None:
        raise _error(rule, name, "true or false", value)
    return result


def parse_list(value: object) -> list[str]:
    """A comma-separated string (or a list) as a list of non-empty, stripped items."""
    if value is None:
        return []
    items: Sequence[object] = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [s for s in (str(item).strip() for item in items) if s]


def parse_mode(rule: str, name: str, value: object) -> ModeKeys | None:
    """A ``ModeKeys`` from its name (any case); None for None / "" / "none"."""
    if value is None or isinstance(value, ModeKeys):
        return value
    text = str(value).strip().upper()
    if text in ("", "NONE", "NULL"):
        return None
    try:
        return ModeKeys[text]
    except KeyError:
        raise _error(rule, name, "one of TRAIN, EVAL, PREDICT, GLOBAL", value) from None
