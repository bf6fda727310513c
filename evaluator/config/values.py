"""Parsers for the string values of settings: booleans, seconds, steps, choices, locations,
URLs.

``as_bool`` is the one reading of a boolean in the project: evaluator settings
(``wait_for_training_end``) and built-in rule parameters (``evaluator.rules.kit.params``) accept the
same words. The other parsers take the parameter map and the key, return None when the key is
unset or blank, and raise ``ConfigurationError`` naming the key, the value and what is expected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from evaluator.errors import ConfigurationError
from evaluator.redaction import url_origin
from evaluator.sources import check_location_form
from evaluator.storage.schemes import check_location as check_storage_location
from evaluator.storage.schemes import is_remote, location_forms

__all__ = [
    "FALSE_WORDS",
    "TRUE_WORDS",
    "as_bool",
    "bool_value",
    "check_location",
    "choice_value",
    "seconds_value",
    "step_value",
    "webhook_url_value",
]

TRUE_WORDS = frozenset({"true", "1", "yes", "y", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "n", "off"})

_JOB_NAME = re.compile(r"[A-Za-z0-9](-*[A-Za-z0-9]){0,62}")


def as_bool(value: object) -> bool | None:
    """A bool as it is, or a word of ``TRUE_WORDS`` / ``FALSE_WORDS`` in any case and with
    spaces around; None for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    return None


def bool_value(params: Mapping[str, str], key: str) -> bool | None:
    raw = params.get(key, "")
    if raw.strip() == "":
        return None
    value = as_bool(raw)
    if value is None:
        raise ConfigurationError(f"{key} must be true or false, got {raw!r}")
    return value


def step_value(params: Mapping[str, str], key: str) -> int | None:
    raw = params.get(key)
    if raw is None or raw.strip() == "":
        return None
    if not re.fullmatch(r"\+?[0-9]+", raw.strip()):
        raise ConfigurationError(f"{key} must be a whole number >= 0, got {raw!r}")
    return int(raw)


def seconds_value(params: Mapping[str, str], key: str) -> float | None:
    raw = params.get(key, "").strip()
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigurationError(f"{key} must be a number of seconds > 0, got {params[key]!r}")
    return value


def choice_value(
    params: Mapping[str, str], key: str, choices: Sequence[str], *, upper: bool
) -> str | None:
    raw = params.get(key, "").strip()
    if raw == "":
        return None
    value = raw.upper() if upper else raw.lower()
    value = "WARNING" if value == "WARN" else value
    if value not in choices:
        raise ConfigurationError(f"{key} must be one of {', '.join(choices)}, got {params[key]!r}")
    return value


def check_location(key: str, value: str, *, allow_name: bool = False) -> str:
    """A remote URI (``evaluator.storage.schemes``), a file:// URI or a path; a bare
    training-job name is refused; a location a format opens itself (an MLflow run's
    ``runs:/<run_id>``) when it is well formed."""
    if not allow_name and check_location_form(key, value):
        return value
    check_storage_location(key, value)
    if is_remote(value):
        return value
    if not allow_name and _JOB_NAME.fullmatch(value) and not Path(value).exists():
        raise ConfigurationError(
            f"{key} must be {location_forms()}, got {value!r}: "
            "no such folder, and training-job names are not resolved; give the trial's S3 URI "
            f"(<S3OutputPath>/{value}/debug-output) or a folder path (./{value} for a folder "
            "that does not exist yet)"
        )
    return value


def webhook_url_value(params: Mapping[str, str]) -> str | None:
    """``webhook_url``: an http(s) URL with a host, or None; the error never shows the URL
    (a chat webhook's path is its key)."""
    raw = params.get("webhook_url", "").strip()
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigurationError(
            "webhook_url must be an http:// or https:// URL with a host (--webhook-url, "
            f"WEBHOOK_URL); got {url_origin(raw)}"
        )
    return raw
