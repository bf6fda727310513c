"""The keys the evaluator understands: canonical names, other spellings, the reserved set."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "ALIASES",
    "BOOL_KEYS",
    "ENV_ALIASES",
    "KNOWN_KEYS",
    "OTHER_TRIAL_I",
    "RESERVED_KEYS",
    "RULE_FLAG",
    "RULE_KEYS",
    "TRIAL_KEYS",
    "TRIAL_OPTION_KEYS",
    "canonical",
    "normalize",
]

# Keys with a meaning of their own; none of them reaches a rule as a parameter.
RULE_KEYS = frozenset({"rule_to_invoke", "source_s3_uri", "start_step", "end_step", "action_json"})
TRIAL_KEYS = frozenset(
    {
        "base_trial",
        "s3_path",
        "other_trials",
        "other_trial",
        "other_trials_paths",
        "output_dir",
        "wait_for_training_end",
        "continue_after_fire",
        "poll_interval",
        "progress_interval",
        "checkpoint_interval",
        "rule_step_timeout",
        "log_format",
        "log_level",
        "report",
        "webhook_url",
        "mlflow_write_back",
    }
)
# The trial options (evaluator.engine.options.TrialOptions; their environment variables:
# sources.TRIAL_ENVIRONMENT) a flag, the config file or RuleParameters may also set
# (--tensorboard-run NAME); poll_interval is a TRIAL_KEY of its own.
TRIAL_OPTION_KEYS = frozenset(
    {
        "incomplete_step_window",
        "training_end_delay",
        "collection_wait_timeout",
        "missing_event_file_timeout",
        "max_poll_interval",
        "idle_scans_to_complete",
        "prefetch_steps",
        "value_cache_mb",
        "raw_cache_mb",
        "wait_log_interval",
        "max_regex_length",
        "regex_fallback_timeout",
        "max_index_entries",
        "max_index_file_mb",
        "max_collections_file_mb",
        "s3_connect_timeout",
        "s3_read_timeout",
        "s3_request_deadline",
        "s3_outage_tolerance",
        "tensorboard_run",
        "tensorboard_tag_phases",
        "trial_format",
        "mlflow_tracking_uri",
        "mlflow_request_deadline",
    }
)
KNOWN_KEYS = RULE_KEYS | TRIAL_KEYS | TRIAL_OPTION_KEYS | {"rule_config_file"}
# Never rule parameters: these, other_trial_<i>, and the trial options' environment variables.
# action_str is filled from action_json; given as a parameter, it is an unknown one.
RESERVED_KEYS: frozenset[str] = KNOWN_KEYS | {"action_str"}
BOOL_KEYS = frozenset({"wait_for_training_end", "continue_after_fire", "mlflow_write_back"})
# Other spellings, accepted in every source except the process environment (``RULE`` or
# ``TRIAL_DIR`` there are far more likely to belong to something else).
ALIASES = {
    "trial_dir": "base_trial",
    "rule_name": "rule_to_invoke",
    "rule": "rule_to_invoke",
    "logging_level": "log_level",
    "config": "rule_config_file",
}
# Spellings accepted everywhere, the environment included.
ENV_ALIASES = {"LocalPath": "output_dir", "local_path": "output_dir"}
OTHER_TRIAL_I = re.compile(r"other_trial_(\d+)")
RULE_FLAG = re.compile(r"([^.]+)\.([A-Za-z_]\w*)")  # <Rule>.<parameter>: for that rule only


def canonical(key: str, *, environment: bool) -> str | None:
    """The known key ``key`` spells, or None for a rule parameter."""
    if key in ENV_ALIASES:
        return ENV_ALIASES[key]
    name = key.lower() if key.isupper() else key.replace("-", "_")
    if name in KNOWN_KEYS or OTHER_TRIAL_I.fullmatch(name):
        return name
    return None if environment else ALIASES.get(name)


def normalize(mapping: Mapping[str, str], *, environment: bool) -> dict[str, str]:
    """Known keys under their canonical name; an exact spelling beats an alias."""
    out: dict[str, str] = {}
    exact: set[str] = set()
    for key, value in mapping.items():
        canon = canonical(key, environment=environment)
        if canon is None:
            out[key] = value
        elif key == canon or canon not in exact:
            out[canon] = value
            if key == canon:
                exact.add(canon)
    return out
