"""Every invalid input raises ConfigurationError naming the key, the value and what is expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.config import EvaluatorConfig, load_config, redact_parameters
from evaluator.errors import ConfigurationError

OK = {"rule_to_invoke": "VanishingGradient", "base_trial": "trial"}


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trial").mkdir()


def _load(argv: list[str] | None = None, env: dict[str, str] | None = None) -> EvaluatorConfig:
    return load_config(
        argv or [],
        {**OK, **(env or {})} if env is not None else OK,
        opt_ml_root=Path("opt_ml"),
        stdout_is_tty=False,
    )


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        ({"start_step": "ten"}, [], "start_step must be a whole number >= 0, got 'ten'"),
        ({"end_step": "-1"}, [], "end_step must be a whole number >= 0, got '-1'"),
        ({"start_step": "1.5"}, [], "start_step must be a whole number >= 0, got '1.5'"),
        (
            {"start_step": "5", "end_step": "3"},
            [],
            "start_step (5) must be smaller than end_step (3)",
        ),
        (
            {"start_step": "4"},
            ["--end-step", "4"],
            "start_step (4) must be smaller than end_step (4)",
        ),
        ({"rule_to_invoke": ""}, [], "no rule to run: set rule_to_invoke"),
        ({"rule_to_invoke": "A,,B"}, [], "got 'A,,B': an empty name"),
        (
            {"rule_to_invoke": "Vanishing Gradient"},
            [],
            "'Vanishing Gradient' is not a rule class name",
        ),
        ({"rule_to_invoke": "A,A"}, [], "rule 'A' is listed twice"),
        (
            {"wait_for_training_end": "maybe"},
            [],
            "wait_for_training_end must be true or false, got 'maybe'",
        ),
        ({}, ["--continue-after-fire", "2"], "continue_after_fire must be true or false, got '2'"),
        ({"poll_interval": "0"}, [], "poll_interval must be a number of seconds > 0, got '0'"),
        ({}, ["--poll-interval=fast"], "poll_interval must be a number of seconds > 0, got 'fast'"),
        ({"PROGRESS_INTERVAL": "nan"}, [], "progress_interval must be a number of seconds > 0"),
        ({"log_format": "xml"}, [], "log_format must be one of json, console, got 'xml'"),
        ({"REPORT": "pdf"}, [], "report must be one of none, html, got 'pdf'"),
        (
            {"LOG_LEVEL": "loud"},
            [],
            "log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'",
        ),
        (
            {"base_trial": "my-training-job"},
            [],
            "base_trial must be s3://<bucket>/<prefix>, a folder or a file:// URI, got "
            "'my-training-job': no such folder, and training-job names are not resolved",
        ),
        (
            {"base_trial": "s3://"},
            [],
            "base_trial must be s3://<bucket>/<prefix>, a folder or a file:// URI, got 's3://'",
        ),
        ({"base_trial": "gs://bucket/x"}, [], "got 'gs://bucket/x' (unsupported scheme)"),
        ({"base_trial": "file://"}, [], "base_trial must name a folder after file://"),
        ({"S3_PATH": "s3:///key", "base_trial": ""}, [], "S3_PATH must be s3://<bucket>/<prefix>"),
        ({"other_trial_0": "ftp://host/x"}, [], "other_trial_0 must be s3://<bucket>/<prefix>"),
        (
            {"other_trials": "s3://b/a,other-job"},
            [],
            "other_trials must be s3://<bucket>/<prefix>, "
            "a folder or a file:// URI, got 'other-job'",
        ),
        ({"source_s3_uri": "s3:// spaced"}, [], "source_s3_uri must be s3://<bucket>/<prefix>"),
        (
            {"EVALUATOR_POLL_INTERVAL": "-1"},
            [],
            "poll_interval (environment variable EVALUATOR_POLL_INTERVAL)='-1'",
        ),
        ({}, ["trial"], "unexpected argument 'trial': give options as --key value"),
        ({}, ["-x", "1"], "unexpected argument '-x'"),
        ({}, ["--rule-name=A", "--start-step"], "flag --start-step needs a value"),
    ],
)
def test_invalid_values(env: dict[str, str], argv: list[str], expected: str) -> None:
    """The message names the key, the value given and what is expected."""
    with pytest.raises(ConfigurationError) as info:
        _load(argv, env)
    assert expected in str(info.value)


def test_malformed_processing_config(tmp_path: Path) -> None:
    """Bad JSON in processingjobconfig.json names the file."""
    path = tmp_path / "pc.json"
    path.write_text("{not json")
    with pytest.raises(
        ConfigurationError, match=r"cannot read the processing job config .*pc\.json"
    ):
        load_config([], OK, processing_config_path=path, opt_ml_root=tmp_path)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[1, 2]", "must hold a JSON object, got list"),
        (
            '{"Environment": ["a"]}',
            "Environment of .*pc.json must be a JSON object of parameters, got list",
        ),
    ],
)
def test_processing_config_of_wrong_shape(tmp_path: Path, content: str, expected: str) -> None:
    """A processing config or Environment of the wrong JSON type is refused, naming the file."""
    path = tmp_path / "pc.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=expected):
        load_config([], OK, processing_config_path=path, opt_ml_root=tmp_path)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "rule config file .*rules.json does not exist"),
        ("{oops", "cannot read rule config file .*rules.json: Expecting property name"),
        (
            '{"threshold": {"a": 1}}',
            "parameter 'threshold' in .*rules.json must be a string .*, got {\"a\": 1}",
        ),
        ('{"RuleParameters": "x"}', "RuleParameters of .*rules.json must be a JSON object"),
        ('{"rules": "VanishingGradient"}', '"rules" in .*rules.json must be a list'),
        ("[]", "no rule to run: the rule list in .*rules.json is empty"),
        ('["VanishingGradient"]', "rule 1 of .*rules.json must be a JSON object"),
        ('[{"threshold": "1"}]', "no rule to run in rule 1 of .*rules.json: set rule_to_invoke"),
    ],
)
def test_bad_rule_config_file(tmp_path: Path, content: str | None, expected: str) -> None:
    """A missing, malformed or misshapen --config file names the file and the problem."""
    path = tmp_path / "rules.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError, match=expected):
        load_config(["--config", str(path)], {"base_trial": "trial"}, opt_ml_root=tmp_path)


def test_rule_list_conflicts_with_rule_to_invoke(tmp_path: Path) -> None:
    """A rule list in the file and rule_to_invoke elsewhere are ambiguous together."""
    path = tmp_path / "rules.json"
    path.write_text('[{"rule_to_invoke": "A"}]')
    with pytest.raises(ConfigurationError, match="rule_to_invoke='B' is set by the environment"):
        load_config(["--config", str(path)], OK | {"rule_to_invoke": "B"}, opt_ml_root=tmp_path)


def test_rules_of_a_list_must_share_the_trial(tmp_path: Path) -> None:
    """Rules in one run read one trial: differing base_trial values are refused."""
    path = tmp_path / "rules.json"
    path.write_text(
        '[{"rule_to_invoke": "A", "base_trial": "s3://b/1"},'
        ' {"rule_to_invoke": "B", "base_trial": "s3://b/2"}]'
    )
    with pytest.raises(ConfigurationError, match="base_trial differs between the rules"):
        load_config(["--config", str(path)], {}, opt_ml_root=tmp_path)


def test_redact_parameters() -> None:
    """Keys naming a secret, token, password or key are masked, whatever their case."""
    params = {
        "threshold": "1",
        "api_key": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "SessionToken": "t",
        "db_password": "p",
    }
    assert redact_parameters(params) == {
        "threshold": "1",
        "api_key": "***",
        "AWS_SECRET_ACCESS_KEY": "***",
        "SessionToken": "***",
        "db_password": "***",
    }


def test_config_redacted_masks_rule_parameters(tmp_path: Path) -> None:
    """redacted() is plain data with secrets masked; the configuration keeps the real values."""
    config = load_config(["--webhook-token", "abc", "--threshold", "1"], OK, opt_ml_root=tmp_path)
    data = config.redacted()
    assert data["rules"][0]["parameters"] == {"webhook_token": "***", "threshold": "1"}
    assert data["output_dir"] == "rule-output"  # no <opt_ml>/processing: not on SageMaker
    assert config.rules[0].parameters["webhook_token"] == "abc"
