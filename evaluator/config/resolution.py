"""From merged parameters to decisions: the base trial, the other trials, how to follow the
trial (``TrialOptions``), and the rules to run (``RuleSpec``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluator.config.keys import (
    KNOWN_KEYS,
    OTHER_TRIAL_I,
    RESERVED_KEYS,
    RULE_FLAG,
    TRIAL_KEYS,
    TRIAL_OPTION_KEYS,
    canonical,
)
from evaluator.config.models import RuleSpec
from evaluator.config.sources import (
    RETRY_LIMIT_VARIABLE,
    TRIAL_ENVIRONMENT,
    Entry,
    trial_options_from_env,
)
from evaluator.config.values import bool_value, check_location, seconds_value, step_value
from evaluator.engine.options import TrialOptions
from evaluator.errors import ConfigurationError
from evaluator.formats.trainer_state import STATE_FILE
from evaluator.sources.registry import check_kind, check_location_form
from evaluator.storage.schemes import is_remote

__all__ = [
    "TENSORS_INPUT",
    "check_rule_flags",
    "check_unique",
    "default_output_dir",
    "in_sagemaker_job",
    "other_trials",
    "resolve_base_trial",
    "resolve_trial_options",
    "rules_from_names",
    "shared_settings",
]

TENSORS_INPUT = "processing/input/tensors"
SAGEMAKER_OUTPUT = "processing/output/rule"
LOCAL_OUTPUT = "rule-output"
_SAGEMAKER_TENSORS = "/opt/ml/" + TENSORS_INPUT
_DISPLAY = {"s3_path": "S3_PATH"}
_SAGEMAKER_JOB_VARIABLES = ("TRAINING_JOB_NAME", "TRAINING_JOB_ARN")

_RULE_WANTED = (
    "set rule_to_invoke (environment variable rule_to_invoke or RULE_TO_INVOKE, flag "
    "--rule-name, or RuleParameters in a --config file) to a rule name such as VanishingGradient"
)


def default_output_dir(root: Path) -> Path:
    """Where the result file goes when no output_dir is given: under SageMaker (a
    ``<opt_ml>/processing`` folder exists) ``<opt_ml>/processing/output/rule``, as the closed
    evaluator; elsewhere ``./rule-output``, never a folder under /opt that a user cannot write."""
    if (root / "processing").is_dir():
        return root / SAGEMAKER_OUTPUT
    return Path(LOCAL_OUTPUT)


# ---- trials -----------------------------------------------------------------------------------


def resolve_base_trial(
    params: Mapping[str, str], processing: Mapping[str, Any], *, root: Path, pc_path: Path
) -> tuple[str, str]:
    """(location, where it came from), in the order of container-protocol §1.8.

    A processing input's S3 URI beats its local mirror: with the default S3DownloadMode
    StartOfJob the mirror is a snapshot taken when the rule job started, while training is
    still writing, so only S3 shows the steps that come later. The mirror is used when the
    input's URI is not on S3 (SDK local mode copies a local source there as file://).
    """
    for key in ("base_trial", "s3_path"):
        value = params.get(key, "").strip()
        if value:
            return _folder_of_state_file(
                check_location(_DISPLAY.get(key, key), value)
            ), _DISPLAY.get(key, key)
    mirror = root / TENSORS_INPUT
    uri, name = _tensors_input(processing, mirror, pc_path)
    if uri is not None and is_remote(uri):
        return uri, f"processing input {name!r}"
    if mirror.is_dir():
        return str(mirror), f"folder {mirror}"
    raise _no_trial(uri, name, processing, mirror=mirror, pc_path=pc_path)


def _folder_of_state_file(location: str) -> str:
    """A local ``trainer_state.json`` given as the trial stands for the folder holding it (a
    checkpoint folder: docs/huggingface.md)."""
    path = Path(location.removeprefix("file://"))
    if path.name == STATE_FILE and path.is_file():
        return str(path.parent)
    return location


def _no_trial(
    uri: str | None, name: str, processing: Mapping[str, Any], *, mirror: Path, pc_path: Path
) -> ConfigurationError:
    looked = ["base_trial (--trial-dir, BASE_TRIAL)", "S3_PATH"]
    if uri is not None:
        looked.append(f"processing input {name!r} in {pc_path} ({uri}: not on S3)")
    elif processing:
        looked.append(f"the processing inputs in {pc_path} (none for {_SAGEMAKER_TENSORS})")
    else:
        looked.append(f"{pc_path} (does not exist)")
    looked.append(f"the folder {mirror} (does not exist)")
    return ConfigurationError(
        "no trial to evaluate: set base_trial (or --trial-dir) to the training job's debug "
        "output, an s3:// URI or a folder; looked at " + ", ".join(looked)
    )


def _tensors_input(
    processing: Mapping[str, Any], mirror: Path, pc_path: Path | None = None
) -> tuple[str | None, str]:
    local_paths = {_SAGEMAKER_TENSORS, str(mirror)}
    inputs = processing.get("ProcessingInputs") or []
    if not isinstance(inputs, list):
        raise ConfigurationError(
            f"ProcessingInputs in {pc_path} must be a list, got {type(inputs).__name__}"
        )
    for item in inputs:
        s3 = (item.get("S3Input") or {}) if isinstance(item, dict) else {}
        if not isinstance(s3, dict):
            raise ConfigurationError(
                f"each S3Input in ProcessingInputs of {pc_path} must be an object, got {s3!r}"
            )
        name = str(item.get("InputName", "")) if isinstance(item, dict) else ""
        local = str(s3.get("LocalPath", "")).rstrip("/")
        if s3.get("S3Uri") and (local in local_paths or name in ("tensors", "base_trial")):
            return str(s3["S3Uri"]), name
    return None, ""


def other_trials(params: Mapping[str, str]) -> list[str]:
    """other_trial_<i> (by i), other_trials (commas), other_trial, other_trials_paths (;)."""
    indexed = sorted((int(m.group(1)), k) for k in params if (m := OTHER_TRIAL_I.fullmatch(k)))
    found = [(k, params[k]) for _, k in indexed]
    found += [("other_trials", v) for v in params.get("other_trials", "").split(",")]
    found += [("other_trial", params.get("other_trial", ""))]
    found += [("other_trials_paths", v) for v in params.get("other_trials_paths", "").split(";")]
    out: list[str] = []
    for key, value in found:
        value = value.strip()
        if value and check_location(key, value) not in out:
            out.append(value)
    return out


def in_sagemaker_job(processing: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether this run is a SageMaker job: a processing job's config was read, or SageMaker's
    training-job variables are set."""
    return bool(processing) or any(environ.get(v) for v in _SAGEMAKER_JOB_VARIABLES)


def resolve_trial_options(
    params: Mapping[str, str],
    base_trial: str,
    trial_env: Mapping[str, str],
    *,
    on_sagemaker: bool = False,
) -> tuple[bool, TrialOptions]:
    """Whether to wait for the end marker, and the options every trial of the run is opened
    with: the environment's, then poll_interval, then idle_scans_to_complete decided here
    (None when waiting, else the variable's value or 2)."""
    # Only training under SageMaker writes the end marker while the rule job runs: an S3 trial
    # read by a SageMaker job waits for it. Anything else (a local folder, a finished run copied
    # or uploaded to S3 and read from CI or a laptop) is complete after idle scans, unless
    # wait_for_training_end says otherwise (EVALUATOR_IDLE_SCANS_TO_COMPLETE implies idle scans).
    wait = bool_value(params, "wait_for_training_end")
    given: dict[str, object] = {
        k: params[k].strip() for k in sorted(TRIAL_OPTION_KEYS) if params.get(k, "").strip()
    }
    if wait is None:
        # An MLflow run's status is its end marker (written by every run that ends).
        wait = check_location_form("base_trial", base_trial) or (
            on_sagemaker
            and is_remote(base_trial)
            and not trial_env.get("EVALUATOR_IDLE_SCANS_TO_COMPLETE", "").strip()
            and "idle_scans_to_complete" not in given
        )
    poll = seconds_value(params, "poll_interval")
    if poll is not None:
        given["poll_interval"] = poll
    flags = {k: f"--{k.replace('_', '-')} ({k})" for k in given}
    options = trial_options_from_env(trial_env, labels=flags, **given)
    try:
        check_kind(options.trial_format)
    except ConfigurationError as e:
        where = flags.get("trial_format", "environment variable EVALUATOR_TRIAL_FORMAT")
        raise ConfigurationError(f"{where}: {e}") from None
    idle = None if wait else (options.idle_scans_to_complete or 2)
    return wait, options.model_copy(update={"idle_scans_to_complete": idle})


# ---- rules ------------------------------------------------------------------------------------


def rules_from_names(params: Mapping[str, str], entry: Entry) -> list[RuleSpec]:
    """One RuleSpec per name of rule_to_invoke, sharing the parameters of ``params``."""
    names = _rule_names(params, entry)
    start, end = _step_window(params)
    source = params.get("source_s3_uri", "").strip() or None
    if source is not None:
        check_location("source_s3_uri", source, allow_name=True)
    rule_params = {k: v for k, v in params.items() if _is_rule_parameter(k)}
    own = [k for k in rule_params if k in entry.params] if entry.own and len(names) == 1 else []
    specs = []
    for name in names:
        configuration_name = entry.name if entry.name and len(names) == 1 else name
        targeted = _rule_flags(params, name, configuration_name)
        specs.append(
            RuleSpec(
                name=name,
                configuration_name=configuration_name,
                source=source,
                parameters={**rule_params, **targeted},
                rule_only=[*own, *(k for k in targeted if k not in own)],
                start_step=start,
                end_step=end,
                action_json=params.get("action_json") or None,
            )
        )
    return specs


def _rule_names(params: Mapping[str, str], entry: Entry) -> list[str]:
    raw = params.get("rule_to_invoke", "").strip()
    if not raw:
        where = f" in {entry.where}" if entry.where else ""
        raise ConfigurationError(f"no rule to run{where}: {_RULE_WANTED}")
    names = [n.strip() for n in raw.split(",")]
    for name in names:
        if not name.isidentifier():
            what = "an empty name" if not name else f"{name!r} is not a rule class name"
            raise ConfigurationError(
                f"rule_to_invoke must be rule names separated by commas (letters, digits and "
                f"_, e.g. VanishingGradient,Overfit), got {raw!r}: {what}"
            )
    return names


def _step_window(params: Mapping[str, str]) -> tuple[int, int | None]:
    start = step_value(params, "start_step") or 0
    end = step_value(params, "end_step")
    if end is not None and start >= end:
        raise ConfigurationError(
            f"start_step ({start}) must be smaller than end_step ({end}); end_step is exclusive"
        )
    return start, end


def _is_rule_parameter(key: str) -> bool:
    return (
        key not in KNOWN_KEYS
        and not OTHER_TRIAL_I.fullmatch(key)
        and key not in TRIAL_ENVIRONMENT
        and key != RETRY_LIMIT_VARIABLE
        and "." not in key
    )


def _rule_flags(params: Mapping[str, str], name: str, configuration_name: str) -> dict[str, str]:
    """``<Rule>.<key>`` entries of ``params`` naming this rule (rule_to_invoke in any case, or
    its RuleConfigurationName), by key."""
    names = {name.lower(), configuration_name.lower()}
    return {
        m[2]: value
        for key, value in params.items()
        if (m := RULE_FLAG.fullmatch(key)) and m[1].lower() in names
    }


def check_rule_flags(maps: Sequence[Mapping[str, str]], rules: Sequence[RuleSpec]) -> None:
    """Every ``<Rule>.<key>`` names a rule of the run and a key that can be a parameter."""
    for key in sorted({k for m in maps for k in m if "." in k}):
        m = RULE_FLAG.fullmatch(key)
        if m is None:
            raise ConfigurationError(
                f"{key!r} is not a parameter name: give a parameter for one rule as "
                "<Rule>.<parameter>, e.g. --VanishingGradient.threshold 1e-6"
            )
        if canonical(m[2], environment=False) is not None or m[2] in RESERVED_KEYS:
            raise ConfigurationError(
                f"{m[2]} is not a rule parameter (in {key}): it is an evaluator setting; give "
                f"it as --{m[2]}, or per rule in that rule's entry of a --config rule list"
            )
        if not any(m[1].lower() in (r.name.lower(), r.configuration_name.lower()) for r in rules):
            raise ConfigurationError(
                f"per-rule parameter {key} names no rule of this run (rules: "
                f"{', '.join(r.configuration_name for r in rules)}); the prefix is a "
                "rule_to_invoke name or a RuleConfigurationName"
            )


def check_unique(rules: Sequence[RuleSpec]) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.configuration_name in seen:
            raise ConfigurationError(
                f"rule {rule.configuration_name!r} is listed twice; give each rule once (in a "
                "rule list, a distinct RuleConfigurationName per entry)"
            )
        seen.add(rule.configuration_name)


def shared_settings(maps: Sequence[Mapping[str, str]], where: str) -> dict[str, str]:
    """Trial-level keys of several rules, which must agree: the rules share one trial."""
    shared: dict[str, str] = {}
    for m in maps:
        for key, value in m.items():
            if key not in TRIAL_KEYS and not OTHER_TRIAL_I.fullmatch(key):
                continue
            if key in shared and shared[key] != value:
                raise ConfigurationError(
                    f"{key} differs between the rules in {where} ({shared[key]!r} and "
                    f"{value!r}): all rules of one run share the trial and its settings"
                )
            shared[key] = value
    return shared
