"""Reading the sources: the processing job config, the environment, argv flags, rule files.

Each reader returns string maps with known keys under their canonical names (``keys``); which
source wins is decided by ``load``. ``trial_options_from_env`` is also the notebook's way to
trial options: ``create_trial`` without ``options`` calls it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from evaluator.config.keys import BOOL_KEYS, KNOWN_KEYS, RESERVED_KEYS, canonical, normalize
from evaluator.engine.options import TrialOptions, validated_options
from evaluator.errors import ConfigurationError

__all__ = [
    "RETRY_LIMIT_VARIABLE",
    "TRIAL_ENVIRONMENT",
    "Entry",
    "environ_layer",
    "environment_candidates",
    "parse_argv",
    "read_processing_config",
    "read_rule_file",
    "rule_environment",
    "string_map",
    "trial_options_from_env",
]

log = logging.getLogger("evaluator.config")

# environment variable -> TrialOptions field
TRIAL_ENVIRONMENT = {
    "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW": "incomplete_step_window",
    "SMDEBUG_TRAINING_END_DELAY_REFRESH": "training_end_delay",
    "EVALUATOR_COLLECTION_WAIT_TIMEOUT": "collection_wait_timeout",
    "EVALUATOR_MISSING_EVENT_FILE_TIMEOUT": "missing_event_file_timeout",
    "EVALUATOR_POLL_INTERVAL": "poll_interval",
    "EVALUATOR_MAX_POLL_INTERVAL": "max_poll_interval",
    "EVALUATOR_IDLE_SCANS_TO_COMPLETE": "idle_scans_to_complete",
    "EVALUATOR_PREFETCH_STEPS": "prefetch_steps",
    "SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE": "stop_signal_file",
    "rule_stop_grace_time_secs": "stop_grace_seconds",
    "EVALUATOR_VALUE_CACHE_MB": "value_cache_mb",
    "EVALUATOR_RAW_CACHE_MB": "raw_cache_mb",
    "EVALUATOR_WAIT_LOG_INTERVAL": "wait_log_interval",
    "EVALUATOR_MAX_REGEX_LENGTH": "max_regex_length",
    "EVALUATOR_REGEX_FALLBACK_TIMEOUT": "regex_fallback_timeout",
    "EVALUATOR_MAX_INDEX_ENTRIES": "max_index_entries",
    "EVALUATOR_MAX_INDEX_FILE_MB": "max_index_file_mb",
    "EVALUATOR_MAX_COLLECTIONS_FILE_MB": "max_collections_file_mb",
    "EVALUATOR_S3_CONNECT_TIMEOUT": "s3_connect_timeout",
    "EVALUATOR_S3_READ_TIMEOUT": "s3_read_timeout",
    "EVALUATOR_S3_REQUEST_DEADLINE": "s3_request_deadline",
    "EVALUATOR_S3_OUTAGE_TOLERANCE": "s3_outage_tolerance",
    "EVALUATOR_TENSORBOARD_RUN": "tensorboard_run",
    "EVALUATOR_TENSORBOARD_TAG_PHASES": "tensorboard_tag_phases",
    "EVALUATOR_TRIAL_FORMAT": "trial_format",
    # MLflow's own MLFLOW_TRACKING_URI reaches the option as its key (--mlflow-tracking-uri)
    "EVALUATOR_MLFLOW_TRACKING_URI": "mlflow_tracking_uri",
    "EVALUATOR_MLFLOW_REQUEST_DEADLINE": "mlflow_request_deadline",
}

# smdebug's SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT counts looks for a missing event file, 2 s
# apart (default 100); it sets missing_event_file_timeout to that many times 2 s, unless
# EVALUATOR_MISSING_EVENT_FILE_TIMEOUT says otherwise (docs/compatibility.md).
RETRY_LIMIT_VARIABLE = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
SECONDS_PER_RETRY = 2.0

# Lower-case variables that are the machine's, never a rule's.
_NOT_RULE_PARAMETERS = frozenset(
    {"http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"}
)


def trial_options_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    **overrides: Any,
) -> TrialOptions:
    """Defaults, then the variables of ``TRIAL_ENVIRONMENT`` in ``environ`` (default: the
    process environment), then ``overrides``: an explicit argument wins, None included.
    ``labels`` names an override in error messages (say, with its flag)."""
    env = os.environ if environ is None else environ
    from_env = {
        name: env[var].strip()
        for var, name in TRIAL_ENVIRONMENT.items()
        if env.get(var, "").strip() != ""
    }
    named = {
        name: f"{name} (environment variable {var})"
        for var, name in TRIAL_ENVIRONMENT.items()
        if name in from_env and name not in overrides
    }
    if "missing_event_file_timeout" not in from_env:
        retries = _retry_limit(env)
        if retries is not None:
            from_env["missing_event_file_timeout"] = str(retries * SECONDS_PER_RETRY)
    return validated_options({**from_env, **overrides}, labels={**named, **(labels or {})})


def _retry_limit(env: Mapping[str, str]) -> int | None:
    """smdebug's SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT, a whole number, or None if unset."""
    raw = env.get(RETRY_LIMIT_VARIABLE, "").strip()
    if raw == "":
        return None
    if not raw.lstrip("+").isdigit() or not raw.isascii():
        raise ConfigurationError(
            f"environment variable {RETRY_LIMIT_VARIABLE} must be a whole number >= 0 (how "
            f"many times, {SECONDS_PER_RETRY:g} s apart, a missing event file is looked for), "
            f"got {raw!r}"
        )
    return int(raw)


# ---- the processing job config and the environment -----------------------------------------


def read_processing_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ConfigurationError(f"the processing job config {path} is nested too deeply") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigurationError(f"cannot read the processing job config {path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"the processing job config {path} must hold a JSON object, got {type(data).__name__}"
        )
    return data


def string_map(value: Any, where: str) -> dict[str, str]:
    """A RuleParameters-like map with every value a string (None drops the key)."""
    if not isinstance(value, dict):
        raise ConfigurationError(
            f"{where} must be a JSON object of parameters, got {type(value).__name__}"
        )
    out: dict[str, str] = {}
    for key, raw in value.items():
        if raw is None:
            continue
        if isinstance(raw, (str, int, float)):  # bools too: "True"/"False", as the SDK's str()
            out[key] = str(raw)
        elif key == "action_json" and isinstance(raw, list):
            out[key] = json.dumps(raw)
        else:
            raise ConfigurationError(
                f"parameter {key!r} in {where} must be a string (every "
                f"RuleParameters value is one), got {json.dumps(raw)}"
            )
    return out


def rule_environment(proc_env: Mapping[str, str]) -> dict[str, str]:
    """The processing config's Environment without SageMaker's own ALL-CAPS variables (those
    that are not upper-case aliases of our keys): they are not RuleParameters."""
    ignored = [k for k in proc_env if k.isupper() and canonical(k, environment=False) is None]
    if ignored:
        log.debug(
            "processing config variables that are not rule parameters: %s",
            ", ".join(sorted(ignored)),
        )
    return {k: v for k, v in proc_env.items() if k not in ignored}


def environ_layer(environ: Mapping[str, str], *, listed: Iterable[str]) -> dict[str, str]:
    """Process environment variables that are known keys or listed by the processing config."""
    listed = set(listed)
    wanted = {
        k: v
        for k, v in environ.items()
        if k in listed or canonical(k, environment=True) is not None
    }
    return normalize(wanted, environment=True)


def environment_candidates(environ: Mapping[str, str]) -> dict[str, str]:
    """Lower-case identifiers that are neither reserved nor proxies: possible rule arguments."""
    return {
        k: v
        for k, v in environ.items()
        if k.isidentifier()
        and k == k.lower()
        and k not in _NOT_RULE_PARAMETERS
        and k not in RESERVED_KEYS
        and canonical(k, environment=True) is None
    }


# ---- flags ------------------------------------------------------------------------------------


def parse_argv(argv: Sequence[str]) -> tuple[dict[str, str], str | None]:
    """``--key value`` / ``--key=value`` flags; a flag without a value means "true"."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, value = token[2:].partition("=")
        if not token.startswith("--") or not name:
            raise ConfigurationError(
                f"unexpected argument {token!r}: give options as --key value or --key=value"
            )
        if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            i, value, eq = i + 1, argv[i + 1], "="
        prefix, dot, rest = name.rpartition(".")  # --<Rule>.<key>: the rule name kept as is
        key = canonical(name, environment=False) or prefix + dot + rest.replace("-", "_")
        if not eq and key in KNOWN_KEYS - BOOL_KEYS:
            raise ConfigurationError(f"flag --{name} needs a value (--{name} VALUE)")
        out[key] = value if eq else "true"
        i += 1
    return out, out.pop("rule_config_file", None)


# ---- rule config files ------------------------------------------------------------------------


class Entry(NamedTuple):
    """One rule configuration from a file: its RuleParameters and RuleConfigurationName."""

    params: dict[str, str]
    name: str | None = None
    where: str = ""
    own: bool = False  # an entry of a rule list: its parameters are its rule's alone


def read_rule_file(path: str) -> tuple[list[Entry], bool]:
    """A parameters map or DebugRuleConfiguration (one entry), or a list of them (True)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"rule config file {path} does not exist") from None
    except RecursionError:
        raise ConfigurationError(f"rule config file {path} is nested too deeply") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigurationError(f"cannot read rule config file {path}: {e}") from None
    if isinstance(data, dict) and "rules" in data:
        data = data["rules"]
        if not isinstance(data, list):
            raise ConfigurationError(
                f'"rules" in {path} must be a list of rule configurations, '
                f"got {type(data).__name__}"
            )
    if not isinstance(data, list):
        return [_rule_entry(data, str(path))], False
    if not data:
        raise ConfigurationError(f"no rule to run: the rule list in {path} is empty")
    return [
        _rule_entry(e, f"rule {n} of {path}")._replace(own=True) for n, e in enumerate(data, 1)
    ], True


def _rule_entry(entry: Any, where: str) -> Entry:
    if not isinstance(entry, dict):
        raise ConfigurationError(
            f"{where} must be a JSON object (RuleParameters or a "
            f"DebugRuleConfiguration), got {type(entry).__name__}"
        )
    if not {"RuleParameters", "RuleConfigurationName", "RuleEvaluatorImage"} & entry.keys():
        return Entry(normalize(string_map(entry, where), environment=False), None, where)
    params = normalize(
        string_map(entry.get("RuleParameters") or {}, f"RuleParameters of {where}"),
        environment=False,
    )
    if entry.get("LocalPath"):  # the DebugRuleConfiguration's rule output folder
        params.setdefault("output_dir", str(entry["LocalPath"]))
    name = entry.get("RuleConfigurationName")
    return Entry(params, str(name) if name else None, where)
