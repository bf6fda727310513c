"""load_config: every source, their precedence, aliases and the options derived from them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic
import pytest

from evaluator.config import EvaluatorConfig, load_config

Load = Callable[..., EvaluatorConfig]


@pytest.fixture
def opt_ml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary /opt/ml root; the working folder holds a trial folder named ``trial``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trial").mkdir()
    return tmp_path / "opt_ml"


@pytest.fixture
def load(opt_ml: Path) -> Load:
    """``load(argv, env, processing=...)`` with the temporary /opt/ml root."""

    def run(
        argv: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        processing: dict[str, Any] | None = None,
        tty: bool = False,
    ) -> EvaluatorConfig:
        if processing is not None:
            write_json(opt_ml / "config" / "processingjobconfig.json", processing)
        return load_config(list(argv), env or {}, opt_ml_root=opt_ml, stdout_is_tty=tty)

    return run


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


BASE = {"rule_to_invoke": "VanishingGradient", "base_trial": "trial"}


def test_processing_config_environment_is_read(load: Load) -> None:
    """Every key of the processing config's Environment map is a rule parameter."""
    config = load(processing={"Environment": {**BASE, "threshold": "0.01", "my_knob": "x"}})
    assert config.rules[0].name == "VanishingGradient"
    assert config.rules[0].parameters == {"threshold": "0.01", "my_knob": "x"}
    assert config.base_trial == "trial"
    assert config.on_sagemaker


def test_environment_overrides_processing_config(load: Load) -> None:
    """A process environment variable wins over the processing config for a listed key."""
    config = load(env={"threshold": "0.5"}, processing={"Environment": {**BASE, "threshold": "1"}})
    assert config.rules[0].parameters == {"threshold": "0.5"}


def test_unknown_environment_variables_are_not_parameters(load: Load) -> None:
    """Unlisted lower-case variables stay out of the rule parameters; known keys are read."""
    config = load(env={**BASE, "threshold": "1", "home": "/root", "PATH": "/bin"})
    assert config.rules[0].parameters == {}


def test_upper_case_aliases_and_exact_name_priority(load: Load) -> None:
    """RULE_TO_INVOKE is read when rule_to_invoke is absent; the exact name wins over it."""
    assert load(env={"RULE_TO_INVOKE": "Overfit", "BASE_TRIAL": "trial"}).rules[0].name == "Overfit"
    config = load(
        env={"RULE_TO_INVOKE": "Overfit", "rule_to_invoke": "AllZero", "base_trial": "trial"}
    )
    assert config.rules[0].name == "AllZero"


def test_config_file_beats_environment_and_flags_beat_config_file(
    load: Load, tmp_path: Path
) -> None:
    """Precedence: environment < --config file < command-line flags."""
    path = write_json(tmp_path / "rule.json", {"RuleParameters": {"threshold": "2", "b": "file"}})
    config = load(
        ["--config", str(path), "--b", "flag"],
        env={**BASE, "RULE_CONFIG_FILE": "ignored.json"},
        processing={"Environment": {"threshold": "1", "b": "env", "c": "env"}},
    )
    assert config.rules[0].parameters == {"threshold": "2", "b": "flag", "c": "env"}


def test_rule_config_file_from_environment(load: Load, tmp_path: Path) -> None:
    """RULE_CONFIG_FILE names the JSON file when --config is not given."""
    path = write_json(tmp_path / "params.json", {**BASE, "threshold": "3"})
    assert load(env={"RULE_CONFIG_FILE": str(path)}).rules[0].parameters == {"threshold": "3"}


def test_debug_rule_configuration_file(load: Load, tmp_path: Path) -> None:
    """A whole DebugRuleConfiguration gives the parameters, its name and its LocalPath."""
    path = write_json(
        tmp_path / "drc.json",
        {
            "RuleConfigurationName": "my-vanishing",
            "RuleEvaluatorImage": "img",
            "LocalPath": str(tmp_path / "out"),
            "RuleParameters": {**BASE, "threshold": "1e-7"},
        },
    )
    config = load(["--config", str(path)])
    assert config.rules[0].configuration_name == "my-vanishing"
    assert config.rules[0].name == "VanishingGradient"
    assert config.rules[0].parameters == {"threshold": "1e-7"}
    assert config.output_dir == tmp_path / "out"


def test_json_values_become_strings(load: Load, tmp_path: Path) -> None:
    """Numbers and booleans in a file arrive as the strings SageMaker would send; null drops."""
    actions = [{"name": "stoptraining", "training_job_prefix": "job"}]
    path = write_json(
        tmp_path / "p.json",
        {
            **BASE,
            "num_steps": 10,
            "threshold": 0.5,
            "only_nan": True,
            "gone": None,
            "action_json": actions,
        },
    )
    rule = load(["--config", str(path)]).rules[0]
    assert rule.parameters == {"num_steps": "10", "threshold": "0.5", "only_nan": "True"}
    assert rule.action_json is not None and json.loads(rule.action_json) == actions


def test_flag_spellings(load: Load) -> None:
    """--key value, --key=value, - and _ spellings; unknown flags are string parameters."""
    config = load(
        [
            "--trial-dir",
            "trial",
            "--rule-name=LossNotDecreasing",
            "--num-steps",
            "20",
            "--diff_percent=5",
            "--use-losses-collection",
            "--threshold",
            "-1",
            "--end-step",
            "1000",
            "--start_step=3",
        ]
    )
    rule = config.rules[0]
    assert (rule.name, rule.start_step, rule.end_step) == ("LossNotDecreasing", 3, 1000)
    assert rule.parameters == {
        "num_steps": "20",
        "diff_percent": "5",
        "use_losses_collection": "true",
        "threshold": "-1",
    }


def test_rule_flag_alias(load: Load) -> None:
    """--rule is another spelling of rule_to_invoke, as in the design's CLI example."""
    assert load(["--rule", "Overfit", "--trial-dir", "trial"]).rules[0].name == "Overfit"


def test_2019_keys_are_aliases(load: Load, tmp_path: Path) -> None:
    """start-step, end-step, other-trials-paths (;) and logging-level map to today's keys."""
    path = write_json(
        tmp_path / "old.json",
        {
            **BASE,
            "start-step": "2",
            "end-step": "9",
            "logging-level": "debug",
            "other-trials-paths": "s3://b/one; s3://b/two",
        },
    )
    config = load(["--config", str(path)])
    assert (config.rules[0].start_step, config.rules[0].end_step) == (2, 9)
    assert config.log_level == "DEBUG"
    assert config.other_trials == ["s3://b/one", "s3://b/two"]
    assert config.rules[0].parameters == {}


def test_reserved_keys_are_not_rule_parameters(load: Load) -> None:
    """Keys with their own meaning stay out of parameters; collection_names and tensor_regex
    are constructor arguments and stay in."""
    config = load(
        env={
            **BASE,
            "source_s3_uri": "s3://b/rule.py",
            "action_json": "[]",
            "OUTPUT_DIR": "out",
            "S3_PATH": "s3://b/x",
            "other_trial_0": "s3://b/o",
        },
        processing={
            "Environment": {
                "collection_names": "gradients",
                "tensor_regex": ".*relu",
                "start_step": "1",
                "EVALUATOR_PREFETCH_STEPS": "3",
                "wait_for_training_end": "true",
            }
        },
    )
    rule = config.rules[0]
    assert rule.parameters == {"collection_names": "gradients", "tensor_regex": ".*relu"}
    assert (rule.source, rule.action_json, rule.start_step) == ("s3://b/rule.py", "[]", 1)


def test_trial_options_from_environment(load: Load) -> None:
    """TrialOptions come from the environment, with our poll_interval applied."""
    config = load(["--poll-interval", "0.5"], env={**BASE, "EVALUATOR_PREFETCH_STEPS": "5"})
    assert config.trial_options.prefetch_steps == 5
    assert config.poll_interval == config.trial_options.poll_interval == 0.5


def test_comma_separated_rules_share_parameters(load: Load) -> None:
    """rule_to_invoke=A,B runs both rules with the same parameters."""
    config = load(
        env={**BASE, "rule_to_invoke": "AllZero, ExplodingTensor"},
        processing={"Environment": {"collection_names": "weights"}},
    )
    assert [r.name for r in config.rules] == ["AllZero", "ExplodingTensor"]
    assert all(r.parameters == {"collection_names": "weights"} for r in config.rules)


@pytest.mark.parametrize("wrap", [lambda rules: rules, lambda rules: {"rules": rules}])
def test_rule_list_file(load: Load, tmp_path: Path, wrap: Callable[[list[Any]], Any]) -> None:
    """A list (or {"rules": [...]}) gives each rule its own parameters on one shared trial."""
    rules = [
        {
            "RuleConfigurationName": "vg",
            "RuleParameters": {
                "rule_to_invoke": "VanishingGradient",
                "threshold": "1",
                "end_step": "5",
            },
        },
        {"rule_to_invoke": "Overfit", "patience": "2"},
    ]
    path = write_json(tmp_path / "rules.json", wrap(rules))
    config = load(["--config", str(path), "--trial-dir", "trial", "--shared", "s"])
    assert [(r.configuration_name, r.name, r.end_step) for r in config.rules] == [
        ("vg", "VanishingGradient", 5),
        ("Overfit", "Overfit", None),
    ]
    assert config.rules[0].parameters == {"threshold": "1", "shared": "s"}
    assert config.rules[1].parameters == {"patience": "2", "shared": "s"}


def test_other_trials_order(load: Load) -> None:
    """other_trial_<i> sorted by number, then other_trials, other_trial; duplicates once."""
    config = load(
        env={
            **BASE,
            "other_trial_10": "s3://b/ten",
            "other_trial_2": "s3://b/two",
            "OTHER_TRIALS": "s3://b/a,s3://b/two",
            "other_trial": "file:///x",
        }
    )
    assert config.other_trials == ["s3://b/two", "s3://b/ten", "s3://b/a", "file:///x"]


@pytest.mark.parametrize(
    ("trial", "env", "waits", "idle"),
    [
        ("s3://bucket/job/debug-output", {}, False, 2),
        ("s3://bucket/job/debug-output", {"TRAINING_JOB_NAME": "job"}, True, None),
        ("s3://bucket/job/debug-output", {"wait_for_training_end": "true"}, True, None),
        ("trial", {}, False, 2),
        ("trial", {"TRAINING_JOB_NAME": "job"}, False, 2),
        ("file:///data/trial", {}, False, 2),
        ("trial", {"wait_for_training_end": "TRUE"}, True, None),
        ("s3://bucket/x", {"WAIT_FOR_TRAINING_END": "false"}, False, 2),
        ("s3://bucket/x", {"EVALUATOR_IDLE_SCANS_TO_COMPLETE": "4"}, False, 4),
    ],
)
def test_wait_for_training_end(
    load: Load, trial: str, env: dict[str, str], waits: bool, idle: int | None
) -> None:
    """Waiting for the end marker is the default for an S3 trial read inside a SageMaker job;
    elsewhere (a local folder, an S3 copy read from CI) the trial completes by idle scans."""
    config = load(env={"rule_to_invoke": "A", "base_trial": trial, **env})
    assert config.wait_for_training_end is waits
    assert config.trial_options.idle_scans_to_complete == idle


def test_output_dir_outside_sagemaker(load: Load) -> None:
    """Without an /opt/ml/processing folder the default output folder is ./rule-output."""
    assert load(env=BASE).output_dir == Path("rule-output")


def test_options_and_defaults(load: Load, opt_ml: Path) -> None:
    """Defaults under SageMaker: output under /opt/ml/processing/output/rule, JSON logs, INFO,
    no continuing."""
    (opt_ml / "processing").mkdir(parents=True)
    config = load(env=BASE)
    assert config.output_dir == opt_ml / "processing" / "output" / "rule"
    assert config.message_dir == opt_ml / "output"
    assert (config.log_format, config.log_level, config.continue_after_fire) == (
        "json",
        "INFO",
        False,
    )
    assert config.progress_interval == 10.0
    assert config.checkpoint_interval == 1.0
    assert not config.on_sagemaker and config.processing_job_name is None
    config = load(
        [
            "--continue-after-fire",
            "--log-format",
            "JSON",
            "--log-level=warn",
            "--progress-interval",
            "2.5",
            "--checkpoint-interval",
            "7",
        ],
        env=BASE,
    )
    assert (config.continue_after_fire, config.log_format, config.log_level) == (
        True,
        "json",
        "WARNING",
    )
    assert config.progress_interval == 2.5
    assert config.checkpoint_interval == 7.0


def test_report_is_html_unless_none_is_asked(load: Load, tmp_path: Path) -> None:
    """The report is on by default; --report, REPORT, report and a RuleParameters key turn it
    off, as for the other keys."""
    assert load(env=BASE).report == "html"
    assert load(["--report", "none"], env=BASE).report == "none"
    assert load(env={**BASE, "REPORT": "none"}).report == "none"
    assert load(env={**BASE, "report": "NONE"}).report == "none"
    path = write_json(tmp_path / "params.json", {"report": "none"})
    assert load(["--config", str(path)], env=BASE).report == "none"
    assert load(["--report=html"], env={**BASE, "REPORT": "none"}).report == "html"


def test_log_format_follows_terminal(load: Load) -> None:
    """Console rendering by default on a terminal, JSON otherwise; explicit choice wins."""
    assert load(env=BASE, tty=True).log_format == "console"
    assert load(env={**BASE, "LOG_FORMAT": "json"}, tty=True).log_format == "json"


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ({"OUTPUT_DIR": "/out/a"}, []),
        ({"LocalPath": "/out/a"}, []),
        ({"OUTPUT_DIR": "/elsewhere"}, ["--output-dir", "/out/a"]),
    ],
)
def test_output_dir_sources(load: Load, env: dict[str, str], argv: list[str]) -> None:
    """The output folder comes from OUTPUT_DIR, LocalPath or --output-dir (the flag wins)."""
    assert load(argv, env={**BASE, **env}).output_dir == Path("/out/a")


def test_processing_job_name(load: Load) -> None:
    """The processing job's name is kept for the logs."""
    config = load(env=BASE, processing={"ProcessingJobName": "job-vanishinggradient-1a2b"})
    assert config.processing_job_name == "job-vanishinggradient-1a2b"


def test_config_is_frozen(load: Load) -> None:
    """The validated configuration cannot be changed after loading."""
    config = load(env=BASE)
    with pytest.raises(pydantic.ValidationError):
        config.base_trial = "elsewhere"  # type: ignore[misc]
