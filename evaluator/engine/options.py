"""``TrialOptions``: how a trial is read. Fields, their bounds and the error a bad value raises.

The trial layer takes options as given and reads no environment variable: the configuration
(``evaluator.config.sources.trial_options_from_env``) decides what the variables say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from evaluator.errors import ConfigurationError

__all__ = ["TrialOptions", "validated_options"]


class TrialOptions(BaseModel):
    """How a trial is read. Every field has a default; see the README's "Trial options"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    incomplete_step_window: int = Field(
        1000,
        ge=1,
        description="Steps that may stay incomplete (multi-worker) before half a "
        "window of them is declared complete, as smdebug's SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW.",
    )
    training_end_delay: float = Field(
        0.0,
        ge=0,
        description="Seconds to wait, once the end marker is seen, before the last "
        "listing (smdebug waits 1 s; S3 is read-after-write consistent, so we do not by default).",
    )
    collection_wait_timeout: float = Field(
        600.0,
        ge=0,
        description="Seconds to wait for collection files before giving up; "
        "ends at once with MissingCollectionFiles when training has ended without them.",
    )
    missing_event_file_timeout: float = Field(
        60.0,
        ge=0,
        description="Seconds to wait for an event file named by an index file "
        "while training runs, before the value counts as unavailable.",
    )
    s3_connect_timeout: float = Field(
        10.0, gt=0, description="Seconds to open a connection to S3, per attempt."
    )
    s3_read_timeout: float = Field(
        20.0, gt=0, description="Seconds an S3 request may wait for its next bytes, per attempt."
    )
    s3_request_deadline: float = Field(
        60.0,
        gt=0,
        description="Seconds all attempts of one S3 request may take: an endpoint that never "
        "answers is given up after this.",
    )
    s3_outage_tolerance: float = Field(
        300.0,
        ge=0,
        description="Seconds an S3 outage is waited out once the endpoint has answered "
        "(0: fail at the request deadline).",
    )
    poll_interval: float = Field(1.0, gt=0, description="Seconds between scans while waiting.")
    max_poll_interval: float = Field(
        4.0, gt=0, description="Scans slow down to this interval while nothing new arrives."
    )
    idle_scans_to_complete: int | None = Field(
        None,
        ge=1,
        description="Treat the trial as complete after this many scans (a poll "
        "interval apart) found nothing new; None waits for the end marker, as smdebug.",
    )
    prefetch_steps: int = Field(
        2, ge=0, description="Event files of the next steps fetched ahead of the rule."
    )
    stop_signal_file: str | None = Field(
        None, description="Key, relative to the trial, of SageMaker's rule stop signal file."
    )
    stop_grace_seconds: float = Field(
        60.0, ge=0, description="Seconds after the stop signal's time before the rule stops."
    )
    value_cache_mb: float = Field(
        32.0,
        ge=0,
        description="Memory bound for decoded arrays, kept from their second read "
        "on (rules re-read values; a single pass over a trial never fills it).",
    )
    raw_cache_mb: float = Field(
        128.0,
        ge=0,
        description="Memory bound for event-file bytes, shared by every trial of "
        "the process: the cache that saves I/O.",
    )
    max_coalesced_read_mb: float = Field(
        16.0, ge=0, description="Largest single read that fetches all records of one event file."
    )
    index_read_concurrency: int = Field(64, ge=1, description="Index files read at once.")
    max_regex_length: int = Field(
        4096,
        ge=1,
        description="Longest regular expression over tensor names accepted from a user "
        "(tensor_names(regex=...), a collection's include_regex), in characters.",
    )
    regex_fallback_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds one batch of tensor names may take against a pattern RE2 "
        "cannot run (lookarounds, backreferences), matched by Python's re in a child process.",
    )
    max_index_entries: int = Field(
        200_000,
        ge=1,
        description="Most tensor and shape entries one index file may list; more is refused "
        "as bad data before any entry is built.",
    )
    max_index_file_mb: float = Field(
        64.0, gt=0, description="Largest index file read, in MiB; a larger one is bad data."
    )
    max_collections_file_mb: float = Field(
        64.0, gt=0, description="Largest collections file read, in MiB; a larger one is bad data."
    )
    wait_log_interval: float = Field(
        30.0,
        gt=0,
        description="While waiting for collection files or steps, a log line says what is "
        "awaited and for how long so far, at most this often.",
    )
    trial_format: str = Field(
        "auto",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="What the trial holds: smdebug (smdebug's output), tensorboard "
        "(TensorBoard event files) or the name of a format a plug-in registers "
        "(docs/formats.md); auto decides from what is there when the trial is opened (an "
        "empty location: smdebug). Checked against the known formats when a trial is opened.",
    )
    tensorboard_run: str | None = Field(
        None,
        description="For a TensorBoard log folder holding several runs: the run to read (its "
        "sub-folder, relative to the trial). A folder of one run needs none.",
    )
    tensorboard_collections: dict[str, list[str]] | None = Field(
        None,
        description="For a TensorBoard log: collections of tag names, name -> regular "
        "expressions (re.search); each replaces the default collection of that name.",
    )
    tensorboard_tag_phases: bool | None = Field(
        None,
        description="For a TensorBoard log: read a phase word in a tag as its mode (train/loss, "
        "Loss/train, train_loss -> TRAIN 'loss'; eval/loss, Loss/test, val_loss -> EVAL "
        "'loss'). Unset (auto): when a tag read before the first step is handed on has one; "
        "true: always (a live run whose first tags have none, such as Lightning's hp_metric); "
        "false: never, every tag a tensor of its own.",
    )
    mlflow_tracking_uri: SecretStr | None = Field(
        None,
        description="For a trial given as runs:/<run_id>: the MLflow tracking store that holds "
        "the run (sqlite:///path/mlflow.db, http://host:port, or an mlruns folder); MLflow's "
        "own MLFLOW_TRACKING_URI when unset. A secret (it may hold a password): shown masked.",
    )
    mlflow_request_deadline: float = Field(
        30.0,
        gt=0,
        description="Seconds one request to an MLflow tracking store may take, MLflow's own "
        "retries included: a store that cannot be reached fails the trial after this.",
    )


def validated_options(
    values: Mapping[str, Any], *, labels: Mapping[str, str] | None = None
) -> TrialOptions:
    """``TrialOptions(**values)``; a bad value raises ``ConfigurationError``, one sentence per
    option, naming it as ``labels`` spells it (say, with the variable it came from)."""
    try:
        return TrialOptions(**values)
    except ValidationError as e:
        parts = []
        for item in e.errors():
            name = str(item["loc"][0]) if item["loc"] else "?"
            label = (labels or {}).get(name, name)
            parts.append(f"invalid trial option {label}={values.get(name)!r}: {item['msg']}")
        raise ConfigurationError("; ".join(parts)) from None
