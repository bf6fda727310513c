"""``load_config``: every source read once, merged in order, validated into an
``EvaluatorConfig``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluator.config.keys import normalize
from evaluator.config.models import EvaluatorConfig, RuleSpec
from evaluator.config.output_paths import output_path
from evaluator.config.resolution import (
    check_rule_flags,
    check_unique,
    default_output_dir,
    in_sagemaker_job,
    other_trials,
    resolve_base_trial,
    resolve_trial_options,
    rules_from_names,
    shared_settings,
)
from evaluator.config.sources import (
    Entry,
    environ_layer,
    environment_candidates,
    parse_argv,
    read_processing_config,
    read_rule_file,
    rule_environment,
    string_map,
)
from evaluator.config.trial_list import listed_trial
from evaluator.config.values import (
    bool_value,
    check_location,
    choice_value,
    seconds_value,
    webhook_url_value,
)
from evaluator.errors import ConfigurationError
from evaluator.sources.mlflow.location import is_mlflow_run

__all__ = ["load_config"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def load_config(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    processing_config_path: str | os.PathLike[str] | None = None,
    opt_ml_root: str | os.PathLike[str] = "/opt/ml",
    stdout_is_tty: bool | None = None,
) -> EvaluatorConfig:
    """Read every source once and return the validated configuration.

    ``processing_config_path`` defaults to ``<opt_ml_root>/config/processingjobconfig.json``;
    ``stdout_is_tty`` (default: ask ``sys.stdout``) only picks the default log format.
    Raises ``ConfigurationError`` naming the key, the value and what was expected.
    """
    root = Path(opt_ml_root)
    pc_path = Path(processing_config_path or root / "config" / "processingjobconfig.json")
    processing = read_processing_config(pc_path)
    proc_env = string_map(processing.get("Environment") or {}, f"Environment of {pc_path}")
    maps, entries, rule_list = _parameter_maps(argv, environ, proc_env)
    rules = _rule_specs(maps, entries, environ)
    shared = shared_settings(maps, rule_list) if rule_list else maps[0]
    return _build(
        shared,
        rules,
        root=root,
        processing=processing,
        pc_path=pc_path,
        trial_env={**proc_env, **environ},
        stdout_is_tty=stdout_is_tty,
    )


def _parameter_maps(
    argv: Sequence[str], environ: Mapping[str, str], proc_env: Mapping[str, str]
) -> tuple[list[dict[str, str]], list[Entry], str | None]:
    """One merged map per rule entry (processing config < environment < file < flags), the
    entries, and the rule-list file if one lists the rules."""
    rule_env = rule_environment(proc_env)
    base = normalize(rule_env, environment=False)
    base.update(environ_layer(environ, listed=rule_env.keys()))
    cli, cli_config_file = parse_argv(argv)
    config_file = cli_config_file or base.get("rule_config_file")
    entries, is_list = read_rule_file(config_file) if config_file else ([Entry({})], False)
    if is_list:
        for layer, where in ((base, "the environment"), (cli, "a flag")):
            if "rule_to_invoke" in layer:
                raise ConfigurationError(
                    f"rule_to_invoke={layer['rule_to_invoke']!r} is set by {where}, but "
                    f"{config_file} lists the rules to run: give one or the other"
                )
    maps = [{**base, **entry.params, **cli} for entry in entries]
    return maps, entries, config_file if is_list else None


def _rule_specs(
    maps: Sequence[Mapping[str, str]], entries: Sequence[Entry], environ: Mapping[str, str]
) -> list[RuleSpec]:
    rules = [
        spec for m, entry in zip(maps, entries, strict=True) for spec in rules_from_names(m, entry)
    ]
    check_rule_flags(maps, rules)
    candidates = environment_candidates(environ)
    rules = [
        r.model_copy(
            update={
                "environment_parameters": {
                    k: v for k, v in candidates.items() if k not in r.parameters
                }
            }
        )
        for r in rules
    ]
    check_unique(rules)
    return rules


def _build(
    params: Mapping[str, str],
    rules: list[RuleSpec],
    *,
    root: Path,
    processing: Mapping[str, Any],
    pc_path: Path,
    trial_env: Mapping[str, str],
    stdout_is_tty: bool | None,
) -> EvaluatorConfig:
    listed = listed_trial(trial_env)  # a Kubernetes Indexed Job: this pod's trial of a list
    if listed is None:
        base_trial, trial_source = resolve_base_trial(
            params, processing, root=root, pc_path=pc_path
        )
    else:
        given = [k for k in ("base_trial", "s3_path") if params.get(k, "").strip()]
        if given:
            raise ConfigurationError(
                f"{given[0]} is set and so is a trial list ({listed.source}): give one or the other"
            )
        base_trial = check_location(listed.source, listed.trial)
        trial_source = listed.source
    others = other_trials(params)
    wait, options = resolve_trial_options(
        params, base_trial, trial_env, on_sagemaker=in_sagemaker_job(processing, trial_env)
    )
    output_dir = _output_dir(params, root)
    if listed is not None:  # each pod's outputs in a folder of their own, as in a batch
        output_dir = output_path(output_dir, listed.name)
    job_name = _job_name(processing, pc_path)
    return EvaluatorConfig(
        rules=rules,
        base_trial=base_trial,
        trial_source=trial_source,
        other_trials=others,
        output_dir=output_dir,
        message_dir=root / "output",
        wait_for_training_end=wait,
        continue_after_fire=bool(bool_value(params, "continue_after_fire")),
        poll_interval=options.poll_interval,
        progress_interval=seconds_value(params, "progress_interval") or 10.0,
        checkpoint_interval=seconds_value(params, "checkpoint_interval") or 1.0,
        rule_step_timeout=seconds_value(params, "rule_step_timeout"),
        log_format=_log_format(params, stdout_is_tty),
        log_level=choice_value(params, "log_level", _LEVELS, upper=True) or "INFO",
        report=choice_value(params, "report", ("none", "html"), upper=False) or "html",
        webhook_url=webhook_url_value(params),
        mlflow_write_back=_write_back(params, base_trial),
        on_sagemaker=bool(processing),
        processing_job_name=job_name,
        trial_options=options,
    )


def _write_back(params: Mapping[str, str], base_trial: str) -> bool:
    """``mlflow_write_back``; a ConfigurationError when the trial is not an MLflow run."""
    wanted = bool(bool_value(params, "mlflow_write_back"))
    if wanted and not is_mlflow_run(base_trial):
        raise ConfigurationError(
            f"--mlflow-write-back (mlflow_write_back) writes the verdict to the MLflow run the "
            f"trial is, and the trial {base_trial} is not one: give --trial-dir runs:/<run_id> "
            "(or a file store's run folder), or leave write-back off"
        )
    return wanted


def _output_dir(params: Mapping[str, str], root: Path) -> Path:
    output = params.get("output_dir", "").strip()
    output_dir = Path(output) if output else default_output_dir(root)
    if output_dir.exists() and not output_dir.is_dir():
        raise ConfigurationError(
            f"output_dir {str(output_dir)!r} is a file: give a folder for "
            "rule_evaluation_result.json (--output-dir, OUTPUT_DIR or LocalPath)"
        )
    return output_dir


def _log_format(params: Mapping[str, str], stdout_is_tty: bool | None) -> str:
    if stdout_is_tty is None:
        stdout_is_tty = sys.stdout is not None and sys.stdout.isatty()
    chosen = choice_value(params, "log_format", ("json", "console"), upper=False)
    return chosen or ("console" if stdout_is_tty else "json")


def _job_name(processing: Mapping[str, Any], pc_path: Path) -> str | None:
    job_name = processing.get("ProcessingJobName")
    if job_name is not None and not isinstance(job_name, str):
        raise ConfigurationError(
            f"ProcessingJobName in {pc_path} must be a string, got {job_name!r}"
        )
    return job_name or None
