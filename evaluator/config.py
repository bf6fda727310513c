"""Configuration, validated once. The only module that reads environment variables.

``TrialOptions`` tunes how a trial is read. Its defaults can be changed with the environment
variables smdebug users already know (``SMDEBUG_*``) and ours (``EVALUATOR_*``); arguments to
``create_trial`` win over both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluator.errors import ConfigurationError

__all__ = ["TrialOptions"]

MiB = 1024 * 1024

# environment variable -> TrialOptions field
_TRIAL_ENV = {
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
}


class TrialOptions(BaseModel):
    """How a trial is read. Every field has a default; see the README's "Trial options"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    incomplete_step_window: int = Field(
        1000, ge=1, description="Steps that may stay incomplete (multi-worker) before half a "
        "window of them is declared complete, as smdebug's SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW.")
    training_end_delay: float = Field(
        0.0, ge=0, description="Seconds to wait, once the end marker is seen, before the last "
        "listing (smdebug waits 1 s; S3 is read-after-write consistent, so we do not by default).")
    collection_wait_timeout: float = Field(
        600.0, ge=0, description="Seconds to wait for collection files before giving up; "
        "ends at once with MissingCollectionFiles when training has ended without them.")
    missing_event_file_timeout: float = Field(
        60.0, ge=0, description="Seconds to wait for an event file named by an index file "
        "while training runs, before the value counts as unavailable.")
    poll_interval: float = Field(1.0, gt=0, description="Seconds between scans while waiting.")
    max_poll_interval: float = Field(
        4.0, gt=0, description="Scans slow down to this interval while nothing new arrives.")
    idle_scans_to_complete: int | None = Field(
        None, ge=1, description="Treat the trial as complete after this many scans (a poll "
        "interval apart) found nothing new; None waits for the end marker, as smdebug.")
    prefetch_steps: int = Field(
        2, ge=0, description="Event files of the next steps fetched ahead of the rule.")
    stop_signal_file: str | None = Field(
        None, description="Key, relative to the trial, of SageMaker's rule stop signal file.")
    stop_grace_seconds: float = Field(
        60.0, ge=0, description="Seconds after the stop signal's time before the rule stops.")
    value_cache_mb: float = Field(
        0.0, ge=0, description="Memory bound for decoded arrays; 0 keeps none. Decoding a record "
        "from the cached event-file bytes costs about 8 µs, so this only pays for rules that "
        "read the very same values many times.")
    raw_cache_mb: float = Field(
        128.0, ge=0, description="Memory bound for event-file bytes: the cache that saves I/O.")
    max_coalesced_read_mb: float = Field(
        16.0, ge=0, description="Largest single read that fetches all records of one event file.")
    index_read_concurrency: int = Field(64, ge=1, description="Index files read at once.")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> TrialOptions:
        """Defaults, then environment variables, then ``overrides`` (None values are ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for var, name in _TRIAL_ENV.items():
            raw = env.get(var)
            if raw is not None and raw.strip() != "":
                values[name] = raw.strip()
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as e:
            raise ConfigurationError(_describe(e, values)) from None


def _describe(error: ValidationError, values: Mapping[str, Any]) -> str:
    env_of = {name: var for var, name in _TRIAL_ENV.items()}
    parts = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else "?"
        where = f"{name} (environment variable {env_of[name]})" if name in env_of else name
        parts.append(f"invalid trial option {where}={values.get(name)!r}: {item['msg']}")
    return "; ".join(parts)
