"""Trial options: an explicit setting (flag, config file, argument) wins over the environment,
and options handed to a trial are used as they are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.compat import activate
from evaluator.config import load_config, trial_options_from_env
from evaluator.engine.options import TrialOptions
from evaluator.errors import ConfigurationError
from evaluator.evaluation import Evaluation
from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import Trial, create_trial

IDLE_VARIABLE = {"EVALUATOR_IDLE_SCANS_TO_COMPLETE": "3"}
WAIT_FLAG = ["--rule", "AllZero", "--trial-dir", "trial", "--wait_for_training_end", "true"]


@pytest.fixture
def trial_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A running trial (collections and one step, no end marker) named ``trial`` in the cwd."""
    monkeypatch.chdir(tmp_path)
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([Collection("weights", include_regex=["^w"])])
    writer.write_step(0, {"w": np.zeros((2, 2), np.float32)}, mode=ModeKeys.TRAIN)
    return tmp_path / "trial"


@pytest.fixture
def closing() -> Iterator[list[Trial]]:
    """Trials appended here are closed after the test."""
    trials: list[Trial] = []
    yield trials
    for trial in trials:
        trial.close()


def test_wait_flag_beats_the_idle_scans_variable(trial_folder: Path) -> None:
    """--wait_for_training_end true with EVALUATOR_IDLE_SCANS_TO_COMPLETE set still waits."""
    config = load_config(
        WAIT_FLAG, IDLE_VARIABLE, opt_ml_root=trial_folder.parent / "opt_ml", stdout_is_tty=False
    )
    assert config.wait_for_training_end is True
    assert config.trial_options.idle_scans_to_complete is None


def test_evaluation_opens_the_trial_with_the_config_options(
    trial_folder: Path, monkeypatch: pytest.MonkeyPatch, closing: list[Trial]
) -> None:
    """The trial an evaluation opens gets the configuration's options unchanged, whatever the
    process environment says."""
    for name, value in IDLE_VARIABLE.items():
        monkeypatch.setenv(name, value)
    config = load_config(
        WAIT_FLAG, IDLE_VARIABLE, opt_ml_root=trial_folder.parent / "opt_ml", stdout_is_tty=False
    )
    reporter: Any = None  # opening a trial reports nothing
    trial = Evaluation(config, reporter, threading.Event(), builtins=None)._trial(config.base_trial)
    closing.append(trial)
    assert trial.options is config.trial_options
    assert trial.options.idle_scans_to_complete is None


def test_evaluation_shortens_the_collection_wait_of_a_local_copy(
    trial_folder: Path, closing: list[Trial]
) -> None:
    """A trial completed by idle scans does not wait the full collection timeout; its other
    options are the configuration's."""
    config = load_config(
        ["--rule", "AllZero", "--trial-dir", "trial"],
        IDLE_VARIABLE,
        opt_ml_root=trial_folder.parent / "opt_ml",
        stdout_is_tty=False,
    )
    reporter: Any = None
    trial = Evaluation(config, reporter, threading.Event(), builtins=None)._trial(config.base_trial)
    closing.append(trial)
    assert trial.options == config.trial_options.model_copy(update={"collection_wait_timeout": 5.0})
    assert trial.options.idle_scans_to_complete == 3


def test_create_trial_reads_no_environment(
    trial_folder: Path, monkeypatch: pytest.MonkeyPatch, closing: list[Trial]
) -> None:
    """evaluator.trial.create_trial uses the options given, or its arguments over the defaults;
    trial variables are not read (the trial layer never reaches the configuration)."""
    monkeypatch.setenv("EVALUATOR_IDLE_SCANS_TO_COMPLETE", "3")
    monkeypatch.setenv("EVALUATOR_PREFETCH_STEPS", "not a number")
    options = TrialOptions(poll_interval=0.5)
    given = create_trial(str(trial_folder), options=options)
    closing.append(given)
    assert given.options is options
    built = create_trial(str(trial_folder), incomplete_step_window=20)
    closing.append(built)
    assert built.options == TrialOptions(incomplete_step_window=20)


def test_smdebug_create_trial_reads_the_environment_and_arguments_win(
    trial_folder: Path, monkeypatch: pytest.MonkeyPatch, closing: list[Trial]
) -> None:
    """smdebug.trials.create_trial honours the variables, as smdebug's does; its keyword
    arguments (None included) win, and options given are used as they are."""
    activate()
    from smdebug.trials import LocalTrial
    from smdebug.trials import create_trial as smdebug_create_trial

    monkeypatch.setenv("EVALUATOR_IDLE_SCANS_TO_COMPLETE", "3")
    monkeypatch.setenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "7")
    monkeypatch.setenv("EVALUATOR_PREFETCH_STEPS", "5")
    trial = smdebug_create_trial(
        str(trial_folder), incomplete_step_window=20, idle_scans_to_complete=None
    )
    closing.append(trial)
    assert (
        trial.options.incomplete_step_window,
        trial.options.idle_scans_to_complete,
        trial.options.prefetch_steps,
    ) == (20, None, 5)
    local = LocalTrial("t", str(trial_folder))
    closing.append(local)
    assert (local.options.incomplete_step_window, local.options.idle_scans_to_complete) == (7, 3)
    options = TrialOptions()
    given = smdebug_create_trial(str(trial_folder), options=options)
    closing.append(given)
    assert given.options is options


def test_create_trial_takes_options_or_arguments_not_both(trial_folder: Path) -> None:
    """Options and option arguments together are ambiguous and refused."""
    with pytest.raises(TypeError, match="options or option keyword arguments"):
        create_trial(str(trial_folder), options=TrialOptions(), poll_interval=0.5)


def test_an_explicit_none_beats_the_variable() -> None:
    """None given for an option is a setting too: the variable does not fill it in."""
    environ = {**IDLE_VARIABLE, "SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE": "stop"}
    assert trial_options_from_env(environ).idle_scans_to_complete == 3
    options = trial_options_from_env(environ, idle_scans_to_complete=None, stop_signal_file=None)
    assert (options.idle_scans_to_complete, options.stop_signal_file) == (None, None)


def test_a_bad_option_names_where_it_came_from() -> None:
    """A bad value from a variable names the variable; a bad argument names only the option."""
    with pytest.raises(
        ConfigurationError,
        match=r"prefetch_steps \(environment variable "
        r"EVALUATOR_PREFETCH_STEPS\)='-1'",
    ):
        trial_options_from_env({"EVALUATOR_PREFETCH_STEPS": "-1"})
    with pytest.raises(ConfigurationError) as info:
        trial_options_from_env({"EVALUATOR_PREFETCH_STEPS": "1"}, prefetch_steps=-1)
    assert "invalid trial option prefetch_steps=-1" in str(info.value)
    assert "environment variable" not in str(info.value)


def test_a_trial_option_flag_beats_its_variable_and_never_reaches_the_rule(
    trial_folder: Path,
) -> None:
    """--tensorboard-run, --prefetch-steps, ...: flags for the trial options; the flag wins
    over the environment variable, and no rule gets them as parameters."""
    argv = ["--rule", "AllZero", "--trial-dir", "trial", "--tensorboard-run", "version_1",
            "--prefetch-steps", "0", "--trial-format", "smdebug"]  # fmt: skip
    env = {"EVALUATOR_PREFETCH_STEPS": "4", "EVALUATOR_TENSORBOARD_RUN": "version_0"}
    config = load_config(argv, env, opt_ml_root=trial_folder.parent / "opt_ml", stdout_is_tty=False)
    options = config.trial_options
    assert (options.tensorboard_run, options.prefetch_steps) == ("version_1", 0)
    assert options.trial_format == "smdebug"
    assert config.rules[0].parameters == {}


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--prefetch-steps", "-1", "--prefetch-steps"), ("--trial-format", "csvv", "--trial-format")],
)
def test_a_bad_trial_option_flag_is_named(
    trial_folder: Path, flag: str, value: str, says: str
) -> None:
    argv = ["--rule", "AllZero", "--trial-dir", "trial", flag, value]
    with pytest.raises(ConfigurationError) as caught:
        load_config(argv, {}, opt_ml_root=trial_folder.parent / "opt_ml", stdout_is_tty=False)
    assert says in str(caught.value)
