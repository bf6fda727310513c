"""Configuration, validated once. The only module that reads environment variables and files.

``TrialOptions`` tunes how a trial is read. Its defaults can be changed with the environment
variables smdebug users already know (``SMDEBUG_*``) and ours (``EVALUATOR_*``); arguments to
``create_trial`` win over both.

``load_config(argv, environ)`` builds the ``EvaluatorConfig`` of a run: the rules to run
(``RuleSpec``: name, source, string parameters, step window, action_json), the trial, the
output folders and our own options. Sources, later ones winning:

1. the ``Environment`` map of ``/opt/ml/config/processingjobconfig.json`` (SageMaker copies
   RuleParameters there), if the file exists; its ALL-CAPS keys that are not aliases of our
   keys are SageMaker's own variables, not rule parameters;
2. process environment variables: each known key under its exact lower-case name, else its
   upper-case alias (``RULE_TO_INVOKE``), plus every key the processing config lists; other
   variables are not rule parameters;
3. a JSON file from ``--config PATH`` or ``RULE_CONFIG_FILE``: a parameters map,
   ``{"RuleParameters": ...}``, a whole ``DebugRuleConfiguration``, or a list of those
   (also as ``{"rules": [...]}``) to run several rules on one trial;
4. flags ``--key value`` / ``--key=value`` (``-`` or ``_``; ``--trial-dir`` and ``--rule-name``
   as in smdebug's old rule_invoker); unknown flags become rule parameters, and
   ``--<Rule>.<key>`` a parameter of that rule alone (``RuleSpec.rule_only``).

Whether each rule takes its parameters is checked once the rule classes are loaded
(``evaluator.rules.parameters``).

Every value stays a string, as SageMaker sends it; known keys are parsed here and a bad one
raises ``ConfigurationError`` naming the key, the value and what is expected.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluator.errors import ConfigurationError

__all__ = [
    "EvaluatorConfig",
    "RESERVED_KEYS",
    "RuleSpec",
    "TrialOptions",
    "load_config",
    "redact_parameters",
]

MiB = 1024 * 1024

log = logging.getLogger("evaluator.config")

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
        32.0, ge=0, description="Memory bound for decoded arrays, kept from their second read "
        "on (rules re-read values; a single pass over a trial never fills it).")
    raw_cache_mb: float = Field(
        128.0, ge=0, description="Memory bound for event-file bytes, shared by every trial of "
        "the process: the cache that saves I/O.")
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


# --------------------------------------------------------------------------------------------
# The evaluator's configuration (see the module docstring for the sources and their order).

LogFormat = Literal["json", "console"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

_TENSORS_INPUT = "processing/input/tensors"
_DEFAULT_OUTPUT = "processing/output/rule"
_SAGEMAKER_TENSORS = "/opt/ml/" + _TENSORS_INPUT

# Keys with a meaning of their own; none of them reaches a rule as a parameter.
_RULE_KEYS = frozenset({"rule_to_invoke", "source_s3_uri", "start_step", "end_step", "action_json"})
_TRIAL_KEYS = frozenset({
    "base_trial", "s3_path", "other_trials", "other_trial", "other_trials_paths", "output_dir",
    "wait_for_training_end", "continue_after_fire", "poll_interval", "progress_interval",
    "log_format", "log_level",
})
_KNOWN_KEYS = _RULE_KEYS | _TRIAL_KEYS | {"rule_config_file"}
# Never rule parameters: these, other_trial_<i>, and TrialOptions' environment variables.
# action_str is filled from action_json; given as a parameter, it is an unknown one.
RESERVED_KEYS: frozenset[str] = _KNOWN_KEYS | {"action_str"}
_BOOL_KEYS = frozenset({"wait_for_training_end", "continue_after_fire"})
# Other spellings, accepted in every source except the process environment (``RULE`` or
# ``TRIAL_DIR`` there are far more likely to belong to something else).
_ALIASES = {
    "trial_dir": "base_trial", "rule_name": "rule_to_invoke", "rule": "rule_to_invoke",
    "logging_level": "log_level", "config": "rule_config_file",
}
# Spellings accepted everywhere, the environment included.
_ENV_ALIASES = {"LocalPath": "output_dir", "local_path": "output_dir"}
_OTHER_TRIAL_I = re.compile(r"other_trial_(\d+)")
_RULE_FLAG = re.compile(r"([^.]+)\.([A-Za-z_]\w*)")  # <Rule>.<parameter>: for that rule only
_JOB_NAME = re.compile(r"[A-Za-z0-9](-*[A-Za-z0-9]){0,62}")
_SECRET_WORDS = ("secret", "token", "password", "key")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_DISPLAY = {"s3_path": "S3_PATH"}

_RULE_WANTED = (
    "set rule_to_invoke (environment variable rule_to_invoke or RULE_TO_INVOKE, flag "
    "--rule-name, or RuleParameters in a --config file) to a rule name such as VanishingGradient"
)


def redact_parameters(parameters: Mapping[str, str]) -> dict[str, str]:
    """A copy for logs and result files: values of keys naming a secret, token, password or key
    are masked."""
    return {k: "***" if any(w in k.lower() for w in _SECRET_WORDS) else v
            for k, v in parameters.items()}


class RuleSpec(BaseModel):
    """One rule to run: its name as given, where its code lives, and its string parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="rule_to_invoke as given: a built-in or a class name.")
    configuration_name: str = Field(
        description="RuleConfigurationName when a DebugRuleConfiguration gave it, else the name.")
    source: str | None = Field(None, description="source_s3_uri: s3://, a path or file://.")
    parameters: dict[str, str] = Field(
        default_factory=dict, description="Rule-specific parameters, every value a string; "
        "reserved keys (RESERVED_KEYS) are not among them.")
    start_step: int = Field(0, ge=0, description="First global step evaluated (inclusive).")
    end_step: int | None = Field(None, ge=1, description="Step to stop before (exclusive).")
    action_json: str | None = Field(None, description="Raw action_json; the rule framework "
                                    "decodes it.")
    environment_parameters: dict[str, str] = Field(
        default_factory=dict, description="Lower-case environment variables not named by any "
        "other source: SageMaker copies RuleParameters into the environment and `docker run "
        "-e threshold=...` does the same, so a rule constructor argument of that name is bound "
        "from here when no other source gives it. Nothing else is done with them.")
    rule_only: list[str] = Field(
        default_factory=list, description="Keys of `parameters` given for this rule alone (a "
        "--<Rule>.<key> flag, or its entry of a rule list): an error if the rule does not take "
        "them. Other keys go to the rules of the run that take them.")

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
    log_format: LogFormat = "json"
    log_level: LogLevel = "INFO"
    on_sagemaker: bool = Field(False, description="processingjobconfig.json was found.")
    processing_job_name: str | None = None
    trial_options: TrialOptions = Field(
        description="From the environment, with poll_interval applied and "
        "idle_scans_to_complete set from wait_for_training_end (None when waiting, else the "
        "EVALUATOR_IDLE_SCANS_TO_COMPLETE value or 2).")

    def redacted(self) -> dict[str, Any]:
        """The whole configuration as plain data, secrets in rule parameters masked."""
        data = self.model_dump(mode="json")
        data["rules"] = [
            {**rule, "parameters": redact_parameters(rule["parameters"])} for rule in data["rules"]
        ]
        return data


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
    processing = _read_processing_config(pc_path)
    proc_env = _string_map(processing.get("Environment") or {}, f"Environment of {pc_path}")
    rule_env = _rule_environment(proc_env)
    base = _normalize(rule_env, environment=False)
    base.update(_environ_layer(environ, listed=rule_env.keys()))
    cli, cli_config_file = _parse_argv(argv)
    config_file = cli_config_file or base.get("rule_config_file")
    entries, is_list = _read_rule_file(config_file) if config_file else ([_Entry({})], False)
    if is_list:
        for layer, where in ((base, "the environment"), (cli, "a flag")):
            if "rule_to_invoke" in layer:
                raise ConfigurationError(
                    f"rule_to_invoke={layer['rule_to_invoke']!r} is set by {where}, but "
                    f"{config_file} lists the rules to run: give one or the other")
    maps = [{**base, **entry.params, **cli} for entry in entries]
    rules = [spec for m, entry in zip(maps, entries) for spec in _rules_from_names(m, entry)]
    _check_rule_flags(maps, rules)
    candidates = _environment_candidates(environ)
    rules = [r.model_copy(update={"environment_parameters": {
        k: v for k, v in candidates.items() if k not in r.parameters}}) for r in rules]
    _check_unique(rules)
    shared = _shared_settings(maps, config_file) if is_list else maps[0]
    return _build(shared, rules, root=root, processing=processing, pc_path=pc_path,
                  trial_env={**proc_env, **environ}, stdout_is_tty=stdout_is_tty)


class _Entry(NamedTuple):
    """One rule configuration from a file: its RuleParameters and RuleConfigurationName."""

    params: dict[str, str]
    name: str | None = None
    where: str = ""
    own: bool = False  # an entry of a rule list: its parameters are its rule's alone


# ---- sources --------------------------------------------------------------------------------


def _read_processing_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigurationError(f"cannot read the processing job config {path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"the processing job config {path} must hold a JSON object, "
                                 f"got {type(data).__name__}")
    return data


def _string_map(value: Any, where: str) -> dict[str, str]:
    """A RuleParameters-like map with every value a string (None drops the key)."""
    if not isinstance(value, dict):
        raise ConfigurationError(f"{where} must be a JSON object of parameters, "
                                 f"got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, raw in value.items():
        if raw is None:
            continue
        if isinstance(raw, (str, int, float)):  # bools too: "True"/"False", as the SDK's str()
            out[key] = str(raw)
        elif key == "action_json" and isinstance(raw, list):
            out[key] = json.dumps(raw)
        else:
            raise ConfigurationError(f"parameter {key!r} in {where} must be a string (every "
                                     f"RuleParameters value is one), got {json.dumps(raw)}")
    return out


def _canonical(key: str, *, environment: bool) -> str | None:
    """The known key ``key`` spells, or None for a rule parameter."""
    if key in _ENV_ALIASES:
        return _ENV_ALIASES[key]
    name = key.lower() if key.isupper() else key.replace("-", "_")
    if name in _KNOWN_KEYS or _OTHER_TRIAL_I.fullmatch(name):
        return name
    return None if environment else _ALIASES.get(name)


def _normalize(mapping: Mapping[str, str], *, environment: bool) -> dict[str, str]:
    """Known keys under their canonical name; an exact spelling beats an alias."""
    out: dict[str, str] = {}
    exact: set[str] = set()
    for key, value in mapping.items():
        canon = _canonical(key, environment=environment)
        if canon is None:
            out[key] = value
        elif key == canon or canon not in exact:
            out[canon] = value
            if key == canon:
                exact.add(canon)
    return out


# Lower-case variables that are the machine's, never a rule's.
_NOT_RULE_PARAMETERS = frozenset({"http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"})


def _environment_candidates(environ: Mapping[str, str]) -> dict[str, str]:
    """Lower-case identifiers that are neither reserved nor proxies: possible rule arguments."""
    return {k: v for k, v in environ.items()
            if k.isidentifier() and k == k.lower() and k not in _NOT_RULE_PARAMETERS
            and k not in RESERVED_KEYS and _canonical(k, environment=True) is None}


def _rule_environment(proc_env: Mapping[str, str]) -> dict[str, str]:
    """The processing config's Environment without SageMaker's own ALL-CAPS variables (those
    that are not upper-case aliases of our keys): they are not RuleParameters."""
    ignored = [k for k in proc_env if k.isupper() and _canonical(k, environment=False) is None]
    if ignored:
        log.debug("processing config variables that are not rule parameters: %s",
                  ", ".join(sorted(ignored)))
    return {k: v for k, v in proc_env.items() if k not in ignored}


def _environ_layer(environ: Mapping[str, str], *, listed: Iterable[str]) -> dict[str, str]:
    listed = set(listed)
    wanted = {k: v for k, v in environ.items()
              if k in listed or _canonical(k, environment=True) is not None}
    return _normalize(wanted, environment=True)


def _parse_argv(argv: Sequence[str]) -> tuple[dict[str, str], str | None]:
    """``--key value`` / ``--key=value`` flags; a flag without a value means "true"."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, value = token[2:].partition("=")
        if not token.startswith("--") or not name:
            raise ConfigurationError(f"unexpected argument {token!r}: give options as "
                                     "--key value or --key=value")
        if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            i, value, eq = i + 1, argv[i + 1], "="
        prefix, dot, rest = name.rpartition(".")  # --<Rule>.<key>: the rule name kept as is
        key = _canonical(name, environment=False) or prefix + dot + rest.replace("-", "_")
        if not eq and key in _KNOWN_KEYS - _BOOL_KEYS:
            raise ConfigurationError(f"flag --{name} needs a value (--{name} VALUE)")
        out[key] = value if eq else "true"
        i += 1
    return out, out.pop("rule_config_file", None)


def _read_rule_file(path: str) -> tuple[list[_Entry], bool]:
    """A parameters map or DebugRuleConfiguration (one entry), or a list of them (True)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"rule config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigurationError(f"cannot read rule config file {path}: {e}") from None
    if isinstance(data, dict) and "rules" in data:
        data = data["rules"]
        if not isinstance(data, list):
            raise ConfigurationError(f'"rules" in {path} must be a list of rule configurations, '
                                     f"got {type(data).__name__}")
    if not isinstance(data, list):
        return [_rule_entry(data, str(path))], False
    if not data:
        raise ConfigurationError(f"no rule to run: the rule list in {path} is empty")
    return [_rule_entry(e, f"rule {n} of {path}")._replace(own=True)
            for n, e in enumerate(data, 1)], True


def _rule_entry(entry: Any, where: str) -> _Entry:
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where} must be a JSON object (RuleParameters or a "
                                 f"DebugRuleConfiguration), got {type(entry).__name__}")
    if not {"RuleParameters", "RuleConfigurationName", "RuleEvaluatorImage"} & entry.keys():
        return _Entry(_normalize(_string_map(entry, where), environment=False), None, where)
    params = _normalize(_string_map(entry.get("RuleParameters") or {},
                                    f"RuleParameters of {where}"), environment=False)
    if entry.get("LocalPath"):  # the DebugRuleConfiguration's rule output folder
        params.setdefault("output_dir", str(entry["LocalPath"]))
    name = entry.get("RuleConfigurationName")
    return _Entry(params, str(name) if name else None, where)


# ---- validation -----------------------------------------------------------------------------


def _rules_from_names(params: Mapping[str, str], entry: _Entry) -> list[RuleSpec]:
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
                f"_, e.g. VanishingGradient,Overfit), got {raw!r}: {what}")
    start = _step(params, "start_step") or 0
    end = _step(params, "end_step")
    if end is not None and start >= end:
        raise ConfigurationError(f"start_step ({start}) must be smaller than end_step ({end}); "
                                 "end_step is exclusive")
    source = params.get("source_s3_uri", "").strip() or None
    if source is not None:
        _check_location("source_s3_uri", source, allow_name=True)
    rule_params = {k: v for k, v in params.items()
                   if k not in _KNOWN_KEYS and not _OTHER_TRIAL_I.fullmatch(k)
                   and k not in _TRIAL_ENV and "." not in k}
    own = [k for k in rule_params if k in entry.params] if entry.own and len(names) == 1 else []
    specs = []
    for name in names:
        configuration_name = entry.name if entry.name and len(names) == 1 else name
        targeted = _rule_flags(params, name, configuration_name)
        specs.append(RuleSpec(
            name=name, configuration_name=configuration_name, source=source,
            parameters={**rule_params, **targeted},
            rule_only=[*own, *(k for k in targeted if k not in own)],
            start_step=start, end_step=end, action_json=params.get("action_json") or None))
    return specs


def _rule_flags(params: Mapping[str, str], name: str, configuration_name: str) -> dict[str, str]:
    """``<Rule>.<key>`` entries of ``params`` naming this rule (rule_to_invoke in any case, or
    its RuleConfigurationName), by key."""
    names = {name.lower(), configuration_name.lower()}
    return {m[2]: value for key, value in params.items()
            if (m := _RULE_FLAG.fullmatch(key)) and m[1].lower() in names}


def _check_rule_flags(maps: Sequence[Mapping[str, str]], rules: Sequence[RuleSpec]) -> None:
    """Every ``<Rule>.<key>`` names a rule of the run and a key that can be a parameter."""
    for key in sorted({k for m in maps for k in m if "." in k}):
        m = _RULE_FLAG.fullmatch(key)
        if m is None:
            raise ConfigurationError(
                f"{key!r} is not a parameter name: give a parameter for one rule as "
                "<Rule>.<parameter>, e.g. --VanishingGradient.threshold 1e-6")
        if _canonical(m[2], environment=False) is not None or m[2] in RESERVED_KEYS:
            raise ConfigurationError(
                f"{m[2]} is not a rule parameter (in {key}): it is an evaluator setting; give "
                f"it as --{m[2]}, or per rule in that rule's entry of a --config rule list")
        if not any(m[1].lower() in (r.name.lower(), r.configuration_name.lower())
                   for r in rules):
            raise ConfigurationError(
                f"per-rule parameter {key} names no rule of this run (rules: "
                f"{', '.join(r.configuration_name for r in rules)}); the prefix is a "
                "rule_to_invoke name or a RuleConfigurationName")


def _check_unique(rules: Sequence[RuleSpec]) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.configuration_name in seen:
            raise ConfigurationError(
                f"rule {rule.configuration_name!r} is listed twice; give each rule once (in a "
                "rule list, a distinct RuleConfigurationName per entry)")
        seen.add(rule.configuration_name)


def _shared_settings(maps: Sequence[Mapping[str, str]], where: str) -> dict[str, str]:
    """Trial-level keys of several rules, which must agree: the rules share one trial."""
    shared: dict[str, str] = {}
    for m in maps:
        for key, value in m.items():
            if key not in _TRIAL_KEYS and not _OTHER_TRIAL_I.fullmatch(key):
                continue
            if key in shared and shared[key] != value:
                raise ConfigurationError(
                    f"{key} differs between the rules in {where} ({shared[key]!r} and "
                    f"{value!r}): all rules of one run share the trial and its settings")
            shared[key] = value
    return shared


def _step(params: Mapping[str, str], key: str) -> int | None:
    raw = params.get(key)
    if raw is None or raw.strip() == "":
        return None
    if not re.fullmatch(r"\+?[0-9]+", raw.strip()):
        raise ConfigurationError(f"{key} must be a whole number >= 0, got {raw!r}")
    return int(raw)


def _bool(params: Mapping[str, str], key: str) -> bool | None:
    raw = params.get(key, "").strip().lower()
    if raw == "":
        return None
    if raw in ("true", "1", "yes", "on"):
        return True
    if raw in ("false", "0", "no", "off"):
        return False
    raise ConfigurationError(f"{key} must be true or false, got {params[key]!r}")


def _seconds(params: Mapping[str, str], key: str) -> float | None:
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


def _choice(params: Mapping[str, str], key: str, choices: Sequence[str], *,
            upper: bool) -> str | None:
    raw = params.get(key, "").strip()
    if raw == "":
        return None
    value = raw.upper() if upper else raw.lower()
    value = "WARNING" if value == "WARN" else value
    if value not in choices:
        raise ConfigurationError(f"{key} must be one of {', '.join(choices)}, "
                                 f"got {params[key]!r}")
    return value


def _check_location(key: str, value: str, *, allow_name: bool = False) -> str:
    """An s3:// URI, a file:// URI or a path; a bare training-job name is refused."""
    if value.startswith("s3://"):
        if not re.fullmatch(r"s3://[^\s/]+(/\S*)?", value):
            raise ConfigurationError(
                f"{key} must be s3://<bucket>/<prefix>, a folder or a file:// URI, got {value!r}")
        return value
    if "://" in value and not value.startswith("file://"):
        raise ConfigurationError(f"{key} must be s3://<bucket>/<prefix>, a folder or a file:// "
                                 f"URI, got {value!r} (unsupported scheme)")
    if value == "file://":
        raise ConfigurationError(f"{key} must name a folder after file://, got {value!r}")
    if not allow_name and _JOB_NAME.fullmatch(value) and not Path(value).exists():
        raise ConfigurationError(
            f"{key} must be s3://<bucket>/<prefix>, a folder or a file:// URI, got {value!r}: "
            "no such folder, and training-job names are not resolved; give the trial's S3 URI "
            f"(<S3OutputPath>/{value}/debug-output) or a folder path (./{value} for a folder "
            "that does not exist yet)")
    return value


def _other_trials(params: Mapping[str, str]) -> list[str]:
    """other_trial_<i> (by i), other_trials (commas), other_trial, other_trials_paths (;)."""
    indexed = sorted((int(m.group(1)), k) for k in params
                     if (m := _OTHER_TRIAL_I.fullmatch(k)))
    found = [(k, params[k]) for _, k in indexed]
    found += [("other_trials", v) for v in params.get("other_trials", "").split(",")]
    found += [("other_trial", params.get("other_trial", ""))]
    found += [("other_trials_paths", v) for v in params.get("other_trials_paths", "").split(";")]
    out: list[str] = []
    for key, value in found:
        value = value.strip()
        if value and _check_location(key, value) not in out:
            out.append(value)
    return out


# ---- resolution -----------------------------------------------------------------------------


def _resolve_base_trial(params: Mapping[str, str], processing: Mapping[str, Any], *,
                        root: Path, pc_path: Path) -> tuple[str, str]:
    """(location, where it came from), in the order of container-protocol §1.8.

    A processing input's S3 URI beats its local mirror: with the default S3DownloadMode
    StartOfJob the mirror is a snapshot taken when the rule job started, while training is
    still writing, so only S3 shows the steps that come later. The mirror is used when the
    input's URI is not on S3 (SDK local mode copies a local source there as file://).
    """
    for key in ("base_trial", "s3_path"):
        value = params.get(key, "").strip()
        if value:
            return _check_location(_DISPLAY.get(key, key), value), _DISPLAY.get(key, key)
    mirror = root / _TENSORS_INPUT
    looked = ["base_trial (--trial-dir, BASE_TRIAL)", "S3_PATH"]
    uri, name = _tensors_input(processing, mirror, pc_path)
    if uri is not None and uri.startswith("s3://"):
        return uri, f"processing input {name!r}"
    if mirror.is_dir():
        return str(mirror), f"folder {mirror}"
    if uri is not None:
        looked.append(f"processing input {name!r} in {pc_path} ({uri}: not on S3)")
    elif processing:
        looked.append(f"the processing inputs in {pc_path} (none for {_SAGEMAKER_TENSORS})")
    else:
        looked.append(f"{pc_path} (does not exist)")
    looked.append(f"the folder {mirror} (does not exist)")
    raise ConfigurationError(
        "no trial to evaluate: set base_trial (or --trial-dir) to the training job's debug "
        "output, an s3:// URI or a folder; looked at " + ", ".join(looked))


def _tensors_input(processing: Mapping[str, Any], mirror: Path,
                   pc_path: Path | None = None) -> tuple[str | None, str]:
    local_paths = {_SAGEMAKER_TENSORS, str(mirror)}
    inputs = processing.get("ProcessingInputs") or []
    if not isinstance(inputs, list):
        raise ConfigurationError(
            f"ProcessingInputs in {pc_path} must be a list, got {type(inputs).__name__}")
    for item in inputs:
        s3 = (item.get("S3Input") or {}) if isinstance(item, dict) else {}
        if not isinstance(s3, dict):
            raise ConfigurationError(
                f"each S3Input in ProcessingInputs of {pc_path} must be an object, got {s3!r}")
        name = str(item.get("InputName", "")) if isinstance(item, dict) else ""
        local = str(s3.get("LocalPath", "")).rstrip("/")
        if s3.get("S3Uri") and (local in local_paths or name in ("tensors", "base_trial")):
            return str(s3["S3Uri"]), name
    return None, ""


def _build(params: Mapping[str, str], rules: list[RuleSpec], *, root: Path,
           processing: Mapping[str, Any], pc_path: Path, trial_env: Mapping[str, str],
           stdout_is_tty: bool | None) -> EvaluatorConfig:
    base_trial, trial_source = _resolve_base_trial(params, processing, root=root,
                                                   pc_path=pc_path)
    other_trials = _other_trials(params)
    # A local folder never receives the end marker SageMaker writes to S3: complete it by
    # idle scans instead (an explicit EVALUATOR_IDLE_SCANS_TO_COMPLETE implies the same).
    wait = _bool(params, "wait_for_training_end")
    if wait is None:
        wait = base_trial.startswith("s3://") and not trial_env.get(
            "EVALUATOR_IDLE_SCANS_TO_COMPLETE", "").strip()
    options = TrialOptions.from_env(trial_env, poll_interval=_seconds(params, "poll_interval"))
    idle = None if wait else (options.idle_scans_to_complete or 2)
    options = options.model_copy(update={"idle_scans_to_complete": idle})
    if stdout_is_tty is None:
        stdout_is_tty = sys.stdout is not None and sys.stdout.isatty()
    output = params.get("output_dir", "").strip()
    output_dir = Path(output) if output else root / _DEFAULT_OUTPUT
    if output_dir.exists() and not output_dir.is_dir():
        raise ConfigurationError(
            f"output_dir {str(output_dir)!r} is a file: give a folder for "
            "rule_evaluation_result.json (--output-dir, OUTPUT_DIR or LocalPath)")
    job_name = processing.get("ProcessingJobName")
    if job_name is not None and not isinstance(job_name, str):
        raise ConfigurationError(
            f"ProcessingJobName in {pc_path} must be a string, got {job_name!r}")
    return EvaluatorConfig(
        rules=rules,
        base_trial=base_trial,
        trial_source=trial_source,
        other_trials=other_trials,
        output_dir=output_dir,
        message_dir=root / "output",
        wait_for_training_end=wait,
        continue_after_fire=bool(_bool(params, "continue_after_fire")),
        poll_interval=options.poll_interval,
        progress_interval=_seconds(params, "progress_interval") or 10.0,
        log_format=_choice(params, "log_format", ("json", "console"), upper=False)
        or ("console" if stdout_is_tty else "json"),
        log_level=_choice(params, "log_level", _LEVELS, upper=True) or "INFO",
        on_sagemaker=bool(processing),
        processing_job_name=processing.get("ProcessingJobName") or None,
        trial_options=options,
    )
