"""Bad input, end to end: the real command in a subprocess must end every mistake with exit 2,
a ``ClientError: ...`` text naming what to fix (log line, message and failure files, result
file), no temporary files left behind, and the trial untouched (DESIGN §5 and §7)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.golden import DATA
from tests.conftest import TEST_CREDENTIALS
from tests.support.bad_inputs import (
    Case,
    Cases,
    Check,
    Prepared,
    TrialCopy,
    Workspace,
    assert_client_error,
    finish,
    prepare_and_run,
    trial_copy,
)
from tests.support.evaluator_cli import EvaluatorCli, copy_trial, tree_snapshot
from tests.support.faulty_proxy import FaultyProxy
from tests.support.s3server import MotoS3

# ------------------------------------------------------------------------------ rules as users
# write them: smdebug imports, string parameters.

NEEDS_THRESHOLD = """\
from smdebug.rules import Rule


class NeedsThreshold(Rule):
    def __init__(self, base_trial, threshold, action_str=None):
        super().__init__(base_trial, action_str)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        return False
"""

DIVIDES_BY_ZERO = """\
from smdebug.rules import Rule


class RatioRule(Rule):
    def __init__(self, base_trial, action_str=None):
        super().__init__(base_trial, action_str)

    def invoke_at_step(self, step):
        ratio = 1 / (step - step)
        return ratio > 1
"""

SYNTAX_ERROR = """\
from smdebug.rules import Rule

class BrokenRule(Rule)
    def invoke_at_step(self, step):
        return False
"""

IMPORTS_MISSING_MODULE = """\
from smdebug.rules import Rule
import no_such_module_for_rules

class NeedsModule(Rule):
    def invoke_at_step(self, step):
        return False
"""

REJECTS_WINDOW = """\
from smdebug.rules import Rule


class WindowRule(Rule):
    def __init__(self, base_trial, window="10", action_str=None):
        super().__init__(base_trial, action_str)
        if int(window) <= 0:
            raise ValueError(f"window must be a positive number of steps, got {window}")

    def invoke_at_step(self, step):
        return False
"""

NOT_A_RULE = """\
class PlainRule:
    def __init__(self, base_trial):
        self.base_trial = base_trial

    def invoke_at_step(self, step):
        return False
"""

NO_INVOKE_AT_STEP = """\
from smdebug.rules import Rule


class NoInvoke(Rule):
    def __init__(self, base_trial, action_str=None):
        super().__init__(base_trial, action_str)
"""

# A rule file written as a script: argparse at import time sees the evaluator's own argv.
PARSES_ARGV_AT_IMPORT = """\
import argparse
from smdebug.rules import Rule
parser = argparse.ArgumentParser()
parser.add_argument("--threshold", default="0.1")
args = parser.parse_args()

class ScriptRule(Rule):
    def invoke_at_step(self, step):
        return False
"""

EXITS_IN_CONSTRUCTOR = """\
import sys
from smdebug.rules import Rule


class QuitsEarly(Rule):
    def __init__(self, base_trial, action_str=None):
        super().__init__(base_trial, action_str)
        sys.exit(0)

    def invoke_at_step(self, step):
        return False
"""

EXITS_IN_INVOKE_AT_STEP = """\
import sys
from smdebug.rules import Rule


class GivesUp(Rule):
    def invoke_at_step(self, step):
        sys.exit("no gradients to check")
"""


# ------------------------------------------------------------------------------ how cases run
#
# Each local case is a generator (tests/support/bad_inputs.py: the harness and the contract
# every run keeps, ``assert_client_error``): it lays out its files in its own folder (``ws``),
# yields one command line, receives the finished run and checks it. The module fixture
# prepares every selected case, runs the commands two at a time, and each case is then checked
# as its own test, ``test_bad_input[<case>]``. The S3 cases at the end are plain tests: they
# need the moto fixtures.

CASES = Cases()
bad_input = CASES.register


@pytest.fixture(scope="module")
def bad_input_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Prepared]:
    """Every selected case prepared, and its command run (two at a time)."""
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "function", None) is test_bad_input
    ]
    return prepare_and_run(selected, tmp_path_factory.mktemp)


def test_bad_input(case: Case, bad_input_runs: dict[str, Prepared]) -> None:
    """Each bad input below ends in exit 2 with a ClientError naming what to fix."""
    finish(case, bad_input_runs[case.id])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function is test_bad_input:
        metafunc.parametrize("case", CASES.params)


# ------------------------------------------------------------------------------ configuration
# errors before any configuration exists: no reporter, the command's own ClientError line


@bad_input()
def config_file_with_bad_json(ws: Workspace) -> Check:
    """A --config file that is not JSON is named, with the place of the syntax error."""
    path = ws.config_file('{"rule_to_invoke": "VanishingGradient",\n  "threshold": 0.1,\n}')
    run = yield ws.command("--config", str(path), "--base_trial", str(ws.trial))
    assert_client_error(run, str(path), "line 3", trial=ws.trial, configured=False)


@bad_input(params={"flag": ("flag",), "environment": ("environment",)})
def config_file_that_does_not_exist(ws: Workspace, source: str) -> Check:
    """A config file that is not there (--config or RULE_CONFIG_FILE) is named."""
    path = ws.root / "no_such_config.json"
    if source == "flag":
        run = yield ws.command("--config", str(path), "--base_trial", str(ws.trial))
    else:
        run = yield ws.command("--base_trial", str(ws.trial), env={"RULE_CONFIG_FILE": str(path)})
    assert_client_error(run, str(path), "does not exist", trial=ws.trial, configured=False)


@bad_input()
def config_file_with_an_empty_rule_list(ws: Workspace) -> Check:
    """A --config file holding an empty rule list is named."""
    path = ws.config_file("[]")
    run = yield ws.command("--config", str(path), "--base_trial", str(ws.trial))
    assert_client_error(run, str(path), "rule list", "empty", trial=ws.trial, configured=False)


@bad_input()
def non_string_parameter_in_config_file(ws: Workspace) -> Check:
    """RuleParameters values are strings; a nested object is named with its key and file."""
    path = ws.config_file(
        {"RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": {"value": 0.1}}}
    )
    run = yield ws.command("--config", str(path), "--base_trial", str(ws.trial))
    assert_client_error(run, "'threshold'", str(path), trial=ws.trial, configured=False)


@bad_input()
def rule_to_invoke_missing(ws: Workspace) -> Check:
    """Without rule_to_invoke the message says which key to set and how."""
    run = yield ws.command("--base_trial", str(ws.trial), "--threshold", "0.1")
    assert_client_error(run, "rule_to_invoke", trial=ws.trial, configured=False)


@bad_input()
def rule_to_invoke_that_is_not_a_class_name(ws: Workspace) -> Check:
    """A rule_to_invoke that cannot be a class name is quoted back."""
    run = yield ws.command("--rule_to_invoke", "Vanishing Gradient", "--base_trial", str(ws.trial))
    assert_client_error(
        run, "rule_to_invoke", "'Vanishing Gradient'", trial=ws.trial, configured=False
    )


@bad_input()
def same_rule_named_twice(ws: Workspace) -> Check:
    """A rule list config naming the same rule twice names the rule."""
    path = ws.config_file(
        {
            "rules": [
                {
                    "RuleConfigurationName": "VanishingGradient",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                },
                {
                    "RuleConfigurationName": "VanishingGradient",
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "0.1"},
                },
            ]
        }
    )
    run = yield ws.command("--config", str(path), "--base_trial", str(ws.trial))
    assert_client_error(run, "'VanishingGradient'", "twice", trial=ws.trial, configured=False)


@bad_input()
def rule_list_and_rule_flag_both_given(ws: Workspace) -> Check:
    """A rule list in --config plus --rule_to_invoke: the conflict is named."""
    path = ws.config_file([{"rule_to_invoke": "VanishingGradient"}])
    run = yield ws.command(
        "--config",
        str(path),
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
    )
    assert_client_error(
        run, "rule_to_invoke", "a flag", str(path), trial=ws.trial, configured=False
    )


@bad_input()
def rules_of_a_list_disagree_on_the_trial(ws: Workspace) -> Check:
    """Rules of one list that give different base trials: the key and both values are named."""
    other = str(ws.trial) + "_other"
    path = ws.config_file(
        [
            {
                "RuleConfigurationName": "A",
                "RuleParameters": {
                    "rule_to_invoke": "VanishingGradient",
                    "base_trial": str(ws.trial),
                },
            },
            {
                "RuleConfigurationName": "B",
                "RuleParameters": {"rule_to_invoke": "VanishingGradient", "base_trial": other},
            },
        ]
    )
    run = yield ws.command("--config", str(path))
    assert_client_error(run, "base_trial", other, trial=ws.trial, configured=False)


@bad_input()
def start_step_after_end_step(ws: Workspace) -> Check:
    """start_step > end_step (from environment variables) names both keys and values."""
    run = yield ws.command(
        env={
            "rule_to_invoke": "VanishingGradient",
            "base_trial": str(ws.trial),
            "start_step": "10",
            "end_step": "5",
        }
    )
    assert_client_error(run, "start_step (10)", "end_step (5)", trial=ws.trial, configured=False)


@bad_input(params={"negative": ("start_step", "-1"), "not_a_number": ("end_step", "ten")})
def bad_step_value(ws: Workspace, key: str, value: str) -> Check:
    """A negative or non-numeric step names the key and quotes the value."""
    run = yield ws.command(
        "--rule_to_invoke", "VanishingGradient", "--base_trial", str(ws.trial), f"--{key}", value
    )
    assert_client_error(run, key, repr(value), trial=ws.trial, configured=False)


@bad_input()
def invalid_log_level(ws: Workspace) -> Check:
    """--log-level with an unknown value names the key, the value and the choices."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--log-level",
        "LOUD",
    )
    assert_client_error(run, "log_level", "'LOUD'", "DEBUG, INFO", trial=ws.trial, configured=False)


@bad_input()
def wait_for_training_end_not_a_boolean(ws: Workspace) -> Check:
    """wait_for_training_end must be true or false; the value given is quoted."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--wait_for_training_end",
        "maybe",
    )
    assert_client_error(run, "wait_for_training_end", "'maybe'", trial=ws.trial, configured=False)


@bad_input()
def poll_interval_of_zero(ws: Workspace) -> Check:
    """poll_interval=0 names the key, the value and what fits."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--poll_interval",
        "0",
    )
    assert_client_error(
        run, "poll_interval", "'0'", "seconds > 0", trial=ws.trial, configured=False
    )


@bad_input()
def invalid_trial_option_variable(ws: Workspace) -> Check:
    """A trial option from the environment that is not a number names the variable."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        env={"EVALUATOR_POLL_INTERVAL": "fast"},
    )
    assert_client_error(run, "EVALUATOR_POLL_INTERVAL", "'fast'", trial=ws.trial, configured=False)


@bad_input()
def stray_positional_argument(ws: Workspace) -> Check:
    """A word that is not a --key flag is quoted with the expected form."""
    run = yield ws.command("VanishingGradient", "--base_trial", str(ws.trial))
    assert_client_error(run, "'VanishingGradient'", "--key value", trial=ws.trial, configured=False)


@bad_input()
def flag_without_its_value(ws: Workspace) -> Check:
    """A trailing --base_trial without a value names the flag."""
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial")
    assert_client_error(run, "--base_trial", "needs a value", configured=False)


@bad_input(
    params={
        "unsupported_scheme": ("gs://bucket/job/debug-output",),
        "job_name": ("my-training-job",),
    }
)
def base_trial_that_cannot_be_a_location(ws: Workspace, value: str) -> Check:
    """An unsupported scheme, or a bare training-job name, is refused with what to give."""
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", value)
    assert_client_error(run, "base_trial", repr(value), "s3://", configured=False)


@bad_input()
def malformed_processing_job_config(ws: Workspace) -> Check:
    """A processingjobconfig.json that is not JSON is named by its path."""
    path = ws.cli.write_processing_config('{"ProcessingJobName": "rule-job", "Environment": {')
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(ws.trial))
    assert_client_error(run, str(path), "processing job config", trial=ws.trial, configured=False)


@bad_input(
    params={
        "list": ([{"ProcessingJobName": "rule-job"}], "must hold a JSON object"),
        "inputs_not_a_list": (
            {"ProcessingJobName": "rule-job", "ProcessingInputs": 5},
            "ProcessingInputs",
        ),
        "s3input_not_an_object": (
            {
                "ProcessingJobName": "rule-job",
                "ProcessingInputs": [
                    {"InputName": "tensors", "S3Input": "s3://bucket/job/debug-output"}
                ],
            },
            "S3Input",
        ),
    }
)
def processing_job_config_with_the_wrong_shape(ws: Workspace, document: Any, needle: str) -> Check:
    """A processingjobconfig.json of the wrong shape names the file and the wrong part (no
    base_trial given, so the processing inputs are consulted)."""
    path = ws.cli.write_processing_config(json.dumps(document))
    run = yield ws.command("--rule_to_invoke", "VanishingGradient")
    assert_client_error(run, str(path), needle, configured=False)


@bad_input()
def processing_job_name_that_is_not_a_string(ws: Workspace) -> Check:
    """A non-string ProcessingJobName names the key and the file."""
    path = ws.cli.write_processing_config(json.dumps({"ProcessingJobName": 123}))
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(ws.trial))
    assert_client_error(run, "ProcessingJobName", str(path), trial=ws.trial, configured=False)


# ------------------------------------------------------------------------------ the trial


@bad_input()
def missing_trial_path(ws: Workspace) -> Check:
    """A trial folder that does not exist is named, with what it should hold."""
    missing = ws.root / "no" / "such" / "trial"
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(missing))
    assert_client_error(run, str(missing), "does not exist")
    assert not missing.exists()


@bad_input()
def base_trial_that_is_a_file(ws: Workspace) -> Check:
    """A base_trial naming a file inside the trial, not its folder, says it is not a folder."""
    inner = next((ws.trial.path / "collections").rglob("*.json"))
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(inner))
    assert_client_error(run, str(inner), "is not a folder", trial=ws.trial)


@bad_input()
def folder_without_debugging_data(ws: Workspace) -> Check:
    """A folder holding only training_job_end.ts: SageMaker's 'No debugging data' message."""
    folder = ws.root / "empty_job"
    folder.mkdir()
    (folder / "training_job_end.ts").touch()
    empty = TrialCopy(folder, tree_snapshot(folder))
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(folder))
    assert_client_error(run, "No debugging data", str(folder), trial=empty)


@bad_input()
def missing_other_trial(ws: Workspace) -> Check:
    """An other_trials folder that does not exist is named."""
    missing = ws.root / "other_job"
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--other_trials",
        str(missing),
    )
    assert_client_error(run, str(missing), "other_trials", trial=ws.trial)


@bad_input()
def corrupt_event_file(ws: Workspace) -> Check:
    """A damaged record in an event file is named by its file and offset."""
    folder = copy_trial(DATA / "vanishing", ws.root / "damaged")
    event = folder / "events" / "000000000008" / "000000000008_worker_0.tfevents"
    data = bytearray(event.read_bytes())
    data[9] ^= 0xFF  # the first record's length CRC (smdebug writes no payload CRC)
    event.write_bytes(bytes(data))
    damaged = TrialCopy(folder, tree_snapshot(folder))
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", str(folder))
    assert_client_error(run, event.name, "offset", trial=damaged)


@bad_input()
def output_dir_that_is_a_file(ws: Workspace) -> Check:
    """An output_dir that is an existing file is refused, naming output_dir and the path."""
    not_a_folder = ws.root / "results.txt"
    not_a_folder.write_text("not a folder\n")
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--output_dir",
        str(not_a_folder),
    )
    assert_client_error(run, "output_dir", str(not_a_folder), trial=ws.trial, configured=False)
    assert not_a_folder.read_text() == "not a folder\n"


@bad_input()
def path_with_a_non_utf8_byte(ws: Workspace) -> Check:
    """A missing trial path holding a byte that is not UTF-8 still ends in a ClientError."""
    missing = os.fsdecode(os.fsencode(str(ws.root)) + b"/trial-\xff")
    run = yield ws.command("--rule_to_invoke", "VanishingGradient", "--base_trial", missing)
    assert_client_error(run, "base_trial", "does not exist")


# ------------------------------------------------------------------------------ rules


@bad_input()
def unknown_builtin_rule_suggests_the_close_match(ws: Workspace) -> Check:
    """A misspelt built-in rule is quoted, and the close match is suggested."""
    run = yield ws.command("--rule_to_invoke", "VanishingGradients", "--base_trial", str(ws.trial))
    assert_client_error(
        run, "'VanishingGradients'", "Did you mean VanishingGradient", trial=ws.trial
    )


@bad_input()
def rule_class_not_in_the_file(ws: Workspace) -> Check:
    """A class name the rule file does not define names the class and the file."""
    path = ws.rule_file(NEEDS_THRESHOLD)
    run = yield ws.command(
        "--rule_to_invoke",
        "NeedsThreshhold",
        "--source_s3_uri",
        str(path),
        "--base_trial",
        str(ws.trial),
        "--threshold",
        "0.5",
    )
    assert_client_error(run, "'NeedsThreshhold'", str(path), trial=ws.trial)


@bad_input()
def source_that_does_not_exist(ws: Workspace) -> Check:
    """A source_s3_uri naming a local file that is not there is named."""
    missing = ws.root / "rules" / "no_such_rule.py"
    run = yield ws.command(
        "--rule_to_invoke", "MyRule", "--source_s3_uri", str(missing), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, str(missing), "source_s3_uri", trial=ws.trial)


@bad_input(
    params={
        "syntax_error": (SYNTAX_ERROR, "BrokenRule", ("SyntaxError", "line 3")),
        "missing_module": (
            IMPORTS_MISSING_MODULE,
            "NeedsModule",
            ("ModuleNotFoundError", "no_such_module_for_rules", "line 2"),
        ),
    }
)
def rule_file_that_fails_to_import(
    ws: Workspace, text: str, cls: str, needles: tuple[str, ...]
) -> Check:
    """A rule file that does not import names the file, the error and the line."""
    path = ws.rule_file(text, name="broken_rule.py")
    run = yield ws.command(
        "--rule_to_invoke", cls, "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, "broken_rule.py", *needles, trial=ws.trial)


@bad_input()
def missing_required_constructor_parameter(ws: Workspace) -> Check:
    """A constructor argument without default that was not given is named, with how to give it."""
    path = ws.rule_file(NEEDS_THRESHOLD)
    run = yield ws.command(
        "--rule_to_invoke",
        "NeedsThreshold",
        "--source_s3_uri",
        str(path),
        "--base_trial",
        str(ws.trial),
    )
    assert_client_error(run, "NeedsThreshold", "'threshold'", trial=ws.trial)


@bad_input()
def unparseable_number_for_builtin_rule(ws: Workspace) -> Check:
    """threshold=abc for VanishingGradient (a flag) names the rule, the key and the value."""
    run = yield ws.command(
        "--rule_to_invoke", "VanishingGradient", "--base_trial", str(ws.trial), "--threshold", "abc"
    )
    assert_client_error(run, "VanishingGradient", "threshold", "'abc'", trial=ws.trial)


@bad_input(params={"environment": ("environment",), "config_file": ("config_file",)})
def unparseable_number_for_custom_rule(ws: Workspace, source: str) -> Check:
    """A custom rule's float(threshold) failing names the rule, the key and the value, from an
    environment variable or a --config file (the flag source: the built-in case above)."""
    path = ws.rule_file(NEEDS_THRESHOLD)
    common = (
        "--rule_to_invoke",
        "NeedsThreshold",
        "--source_s3_uri",
        str(path),
        "--base_trial",
        str(ws.trial),
    )
    if source == "environment":
        run = yield ws.command(*common, env={"threshold": "abc"})
    else:
        config = ws.config_file(
            {"RuleConfigurationName": "NeedsThreshold", "RuleParameters": {"threshold": "abc"}}
        )
        run = yield ws.command(*common, "--config", str(config))
    assert_client_error(run, "NeedsThreshold", "threshold", "'abc'", trial=ws.trial)


@bad_input()
def custom_rule_constructor_that_raises(ws: Workspace) -> Check:
    """A rule constructor refusing a value: the rule's own message and the value are shown."""
    path = ws.rule_file(REJECTS_WINDOW)
    run = yield ws.command(
        "--rule_to_invoke",
        "WindowRule",
        "--source_s3_uri",
        str(path),
        "--base_trial",
        str(ws.trial),
        "--window",
        "-3",
    )
    assert_client_error(
        run,
        "WindowRule",
        "window must be a positive number of steps",
        "window='-3'",
        trial=ws.trial,
    )


@bad_input()
def custom_rule_without_invoke_at_step(ws: Workspace) -> Check:
    """A Rule subclass that does not implement invoke_at_step names the class and the method."""
    path = ws.rule_file(NO_INVOKE_AT_STEP)
    run = yield ws.command(
        "--rule_to_invoke", "NoInvoke", "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, "NoInvoke", "invoke_at_step", trial=ws.trial)


@bad_input()
def custom_rule_that_is_not_a_rule_subclass(ws: Workspace) -> Check:
    """A class that does not derive from smdebug's Rule is named, with what it must subclass."""
    path = ws.rule_file(NOT_A_RULE)
    run = yield ws.command(
        "--rule_to_invoke", "PlainRule", "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, "PlainRule", "smdebug.rules.Rule", trial=ws.trial)


@bad_input()
def custom_rule_whose_invoke_at_step_raises(ws: Workspace) -> Check:
    """A user's rule raising at a step is a ClientError naming the exception (not our bug)."""
    path = ws.rule_file(DIVIDES_BY_ZERO)
    run = yield ws.command(
        "--rule_to_invoke", "RatioRule", "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, "ZeroDivisionError", "division by zero", trial=ws.trial)
    rule = run.result["rules"][0] if run.result else {}
    assert rule["error_type"] == "ZeroDivisionError", rule
    assert "invoke_at_step" in rule["traceback"], rule  # where, for the rule's author


@bad_input()
def custom_rule_error_names_rule_step_and_line(ws: Workspace) -> Check:
    """A user's rule raising at a step: the message names the rule, the step, file and line."""
    path = ws.rule_file(DIVIDES_BY_ZERO)
    run = yield ws.command(
        "--rule_to_invoke", "RatioRule", "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(
        run, "ZeroDivisionError", "RatioRule", "step 0", "my_rule.py", "line 9", trial=ws.trial
    )


@bad_input(
    params={
        "at_import": (PARSES_ARGV_AT_IMPORT, "ScriptRule", ("SystemExit", "my_rule.py", "line 5")),
        "in_constructor": (EXITS_IN_CONSTRUCTOR, "QuitsEarly", ("SystemExit", "QuitsEarly")),
        "in_invoke_at_step": (
            EXITS_IN_INVOKE_AT_STEP,
            "GivesUp",
            ("SystemExit", "no gradients to check"),
        ),
    }
)
def custom_rule_that_calls_sys_exit(
    ws: Workspace, text: str, cls: str, needles: tuple[str, ...]
) -> Check:
    """A user's rule code calling sys.exit is the user's error: exit 2, named, files written."""
    path = ws.rule_file(text)
    run = yield ws.command(
        "--rule_to_invoke", cls, "--source_s3_uri", str(path), "--base_trial", str(ws.trial)
    )
    assert_client_error(run, *needles, trial=ws.trial)


@bad_input()
def action_json_that_is_not_json(ws: Workspace) -> Check:
    """An action_json that does not parse (cut short) names action_json."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--action_json",
        '[{"name": "email", "endpoint": "me@example.com"',
    )
    assert_client_error(run, "action_json", "not valid JSON", trial=ws.trial)


@bad_input()
def action_json_with_the_wrong_shape(ws: Workspace) -> Check:
    """action_json that is JSON but a list of strings, not of objects, names action_json."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--action_json",
        '["email"]',
    )
    assert_client_error(run, "action_json", "list of JSON objects", trial=ws.trial)


# ------------------------------------------------------------------------------ rule parameters


@bad_input(params={"builtin": ("builtin",), "custom": ("custom",)})
def misspelt_rule_parameter(ws: Workspace, kind: str) -> Check:
    """A parameter the rule does not take (treshold) names it, the rule and 'threshold'."""
    common = ("--base_trial", str(ws.trial), "--treshold", "1e-12")
    if kind == "builtin":
        run = yield ws.command("--rule_to_invoke", "VanishingGradient", *common)
        rule = "VanishingGradient"
    else:
        path = ws.rule_file(NEEDS_THRESHOLD)
        run = yield ws.command(
            "--rule_to_invoke",
            "NeedsThreshold",
            "--source_s3_uri",
            str(path),
            "--threshold",
            "1",
            *common,
        )
        rule = "NeedsThreshold"
    assert_client_error(run, "'treshold'", rule, "did you mean 'threshold'", trial=ws.trial)


@bad_input()
def rule_flag_naming_no_rule_of_the_run(ws: Workspace) -> Check:
    """--<Rule>.<key> for a rule that is not run names the prefix and the run's rules."""
    run = yield ws.command(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        str(ws.trial),
        "--Overfit.patience",
        "2",
    )
    assert_client_error(
        run, "Overfit.patience", "VanishingGradient", trial=ws.trial, configured=False
    )


# ------------------------------------------------------------------------------ S3 (plain tests:
# they need the moto fixtures)


@pytest.fixture
def cli(tmp_path: Path) -> EvaluatorCli:
    return EvaluatorCli(tmp_path)


@pytest.fixture
def proxy_deny(s3_server: MotoS3) -> Iterator[FaultyProxy]:
    """A proxy in front of moto that answers every request with 403 AccessDenied."""
    with FaultyProxy(s3_server.endpoint, deny=True) as proxy:
        yield proxy


def _s3_listing(s3_server: MotoS3, bucket: str) -> list[tuple[str, int, str]]:
    answer = s3_server.client().list_objects_v2(Bucket=bucket)
    return [(o["Key"], o["Size"], o["ETag"]) for o in answer.get("Contents", [])]


def test_s3_access_denied(
    cli: EvaluatorCli,
    s3_server: MotoS3,
    s3_bucket: str,
    upload_folder: Any,
    proxy_deny: FaultyProxy,
) -> None:
    """A 403 from S3 names the trial's URI and the permission the role needs."""
    uri = upload_folder(DATA / "vanishing", "job/debug-output")
    before = _s3_listing(s3_server, s3_bucket)
    run = cli(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        uri,
        aws=True,
        env={"AWS_ENDPOINT_URL": proxy_deny.endpoint},
    )
    assert_client_error(run, f"s3://{s3_bucket}", "s3:ListBucket")
    assert proxy_deny.requests >= 1
    assert _s3_listing(s3_server, s3_bucket) == before


def test_s3_missing_bucket(cli: EvaluatorCli, s3_server: MotoS3) -> None:
    """A base trial in a bucket that does not exist names the bucket."""
    uri = "s3://no-such-bucket-for-rules/job/debug-output"
    run = cli("--rule_to_invoke", "VanishingGradient", "--base_trial", uri, aws=True)
    assert_client_error(run, "no-such-bucket-for-rules")


def test_s3_missing_rule_object(
    cli: EvaluatorCli, tmp_path: Path, s3_server: MotoS3, s3_bucket: str
) -> None:
    """A source_s3_uri naming a .py object that is not there names the URI."""
    trial = trial_copy(DATA / "vanishing", tmp_path / "trial")
    s3_server.put_objects(s3_bucket, {"rules/other_rule.py": NEEDS_THRESHOLD.encode()})
    uri = f"s3://{s3_bucket}/rules/my_rule.py"
    run = cli(
        "--rule_to_invoke",
        "NeedsThreshold",
        "--source_s3_uri",
        uri,
        "--base_trial",
        str(trial),
        "--threshold",
        "0.5",
        aws=True,
    )
    assert_client_error(run, uri, "source_s3_uri", trial=trial)


def test_s3_rule_prefix_without_files(cli: EvaluatorCli, tmp_path: Path, s3_bucket: str) -> None:
    """A source_s3_uri prefix holding nothing names the URI."""
    trial = trial_copy(DATA / "vanishing", tmp_path / "trial")
    uri = f"s3://{s3_bucket}/rules/"
    run = cli(
        "--rule_to_invoke",
        "NeedsThreshold",
        "--source_s3_uri",
        uri,
        "--base_trial",
        str(trial),
        "--threshold",
        "0.5",
        aws=True,
    )
    assert_client_error(run, uri, "source_s3_uri", trial=trial)


def test_s3_without_credentials(cli: EvaluatorCli, s3_server: MotoS3, upload_folder: Any) -> None:
    """An S3 trial without any credentials says how to provide them."""
    uri = upload_folder(DATA / "vanishing", "job/debug-output")
    run = cli(
        "--rule_to_invoke",
        "VanishingGradient",
        "--base_trial",
        uri,
        aws=True,
        unset=list(TEST_CREDENTIALS),
    )
    assert_client_error(run, uri, "credentials")


@pytest.mark.parametrize("suffix", ["jobs/..", "jobs/../job/debug-output", "jobs//job"])
def test_s3_prefix_with_dot_dot_is_a_client_error(
    cli: EvaluatorCli, s3_server: MotoS3, upload_folder: Any, suffix: str
) -> None:
    """A trial prefix with a '..' or empty part (object keys are not paths) is a ClientError
    naming the URI, never exit 3 from the S3 client's path parser."""
    uri = upload_folder(DATA / "vanishing", "job/debug-output")
    bucket = uri.split("/")[2]
    bad = f"s3://{bucket}/{suffix}"
    run = cli("--rule_to_invoke", "VanishingGradient", "--base_trial", bad, aws=True)
    assert_client_error(run, bad, "part", configured=False)
