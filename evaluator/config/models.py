"""The validated configuration: ``RuleSpec`` per rule, ``EvaluatorConfig`` per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evaluator.engine.options import TrialOptions
from evaluator.redaction import redact_parameters

__all__ = ["EvaluatorConfig", "LogFormat", "LogLevel", "RuleSpec", "redact_parameters"]

LogFormat = Literal["json", "console"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
ReportFormat = Literal["none", "html"]


class RuleSpec(BaseModel):
    """One rule to run: its name as given, where its code lives, and its string parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="rule_to_invoke as given: a built-in or a class name.")
    configuration_name: str = Field(
        description="RuleConfigurationName when a DebugRuleConfiguration gave it, else the name."
    )
    source: str | None = Field(None, description="source_s3_uri: s3://, a path or file://.")
    parameters: dict[str, str] = Field(
        default_factory=dict,
        description="Rule-specific parameters, every value a string; "
        "reserved keys (RESERVED_KEYS) are not among them.",
    )
    start_step: int = Field(0, ge=0, description="First global step evaluated (inclusive).")
    end_step: int | None = Field(None, ge=1, description="Step to stop before (exclusive).")
    action_json: str | None = Field(
        None, description="Raw action_json; the rule framework decodes it."
    )
    environment_parameters: dict[str, str] = Field(
        default_factory=dict,
        description="Lower-case environment variables not named by any "
        "other source: SageMaker copies RuleParameters into the environment and `docker run "
        "-e threshold=...` does the same, so a rule constructor argument of that name is bound "
        "from here when no other source gives it. Nothing else is done with them.",
    )
    rule_only: list[str] = Field(
        default_factory=list,
        description="Keys of `parameters` given for this rule alone (a "
        "--<Rule>.<key> flag, or its entry of a rule list): an error if the rule does not take "
        "them. Other keys go to the rules of the run that take them.",
    )

    def redacted_parameters(self) -> dict[str, str]:
        return redact_parameters(self.parameters)


class EvaluatorConfig(BaseModel):
    """Everything one run needs, validated. Built by ``load_config``; passed down, never re-read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[RuleSpec]
    base_trial: str = Field(description="s3://bucket/prefix, a folder, or file://.")
    trial_source: str = Field(description="Where base_trial came from (for the logs).")
    other_trials: list[str] = Field(default_factory=list)
    output_dir: Path
    message_dir: Path = Field(description="Where the message and failure files go.")
    wait_for_training_end: bool
    continue_after_fire: bool = False
    poll_interval: float
    progress_interval: float = Field(10.0, gt=0, description="Seconds between progress lines.")
    checkpoint_interval: float = Field(
        1.0,
        gt=0,
        description="Seconds between rewrites of the result file (the resume point) while "
        "steps are evaluated.",
    )
    rule_step_timeout: float | None = Field(
        None,
        gt=0,
        description="Seconds one rule step may take (rule_step_timeout); None: no limit.",
    )
    log_format: LogFormat = "json"
    log_level: LogLevel = "INFO"
    report: ReportFormat = Field(
        "html", description="The rule report: html (rule_report.html), or none."
    )
    webhook_url: SecretStr | None = Field(
        None,
        description="Where every status change is POSTed as JSON (evaluator.sinks.webhook); "
        "a secret: shown masked.",
    )
    mlflow_write_back: bool = Field(
        False,
        description="Write each rule's status, fired step and diagnosis as tags of the MLflow "
        "run the trial is, and the result file and report as its artifacts "
        "(evaluator.sinks.mlflow_write_back).",
    )
    on_sagemaker: bool = Field(False, description="processingjobconfig.json was found.")
    processing_job_name: str | None = None
    trial_options: TrialOptions = Field(
        description="From the environment, with poll_interval applied and "
        "idle_scans_to_complete set from wait_for_training_end (None when waiting, else the "
        "EVALUATOR_IDLE_SCANS_TO_COMPLETE value or 2). Trials are opened with exactly these."
    )

    def redacted(self) -> dict[str, Any]:
        """The whole configuration as plain data, secrets in rule parameters masked."""
        data = self.model_dump(mode="json")
        data["rules"] = [
            {**rule, "parameters": redact_parameters(rule["parameters"])} for rule in data["rules"]
        ]
        return data
