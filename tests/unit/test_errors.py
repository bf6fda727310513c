"""The evaluator's error tree: exit codes, the type name each error reports, and the errors
that name a rule whose code raised."""

from __future__ import annotations

import pytest

from evaluator.errors import (
    BuiltinRuleError,
    ClientError,
    ConfigurationError,
    EvaluatorError,
    ExitCode,
    InternalServerError,
    RuleCodeError,
    RuleFailed,
    StorageError,
)


def test_exit_code_values() -> None:
    """One exit code per outcome, as README's table gives them; a stop is 128 + the signal."""
    assert [(c.name, int(c)) for c in ExitCode] == [
        ("NO_ISSUES", 0),
        ("ISSUES_FOUND", 1),
        ("CLIENT_ERROR", 2),
        ("INTERNAL_ERROR", 3),
        ("SIGINT", 130),
        ("SIGTERM", 143),
    ]
    assert ExitCode.stopped_by(15) == ExitCode.SIGTERM and ExitCode.stopped_by(2) == 130


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ClientError("x"), ExitCode.CLIENT_ERROR),
        (ConfigurationError("x"), ExitCode.CLIENT_ERROR),
        (StorageError("x", uri="s3://b/k"), ExitCode.CLIENT_ERROR),
        (InternalServerError("x"), ExitCode.INTERNAL_ERROR),
        (EvaluatorError("x"), ExitCode.INTERNAL_ERROR),
    ],
)
def test_each_class_knows_its_exit_code(error: EvaluatorError, code: ExitCode) -> None:
    """Who must act decides the exit code: the user (2) or us (3)."""
    assert error.exit_code is code


def test_error_type_is_the_class_name_unless_given() -> None:
    """Our errors report their class name; one built for smdebug's case reports that name."""
    assert ConfigurationError("x").error_type == "ConfigurationError"
    given = ClientError("nothing checked", error_type="InsufficientInformationForRuleInvocation")
    assert (given.error_type, str(given), given.args) == (
        "InsufficientInformationForRuleInvocation",
        "nothing checked",
        ("nothing checked",),
    )


def test_rule_code_error_names_rule_step_and_place() -> None:
    """A user's rule that raised: a ClientError naming the rule, exception, step, file and
    line, reporting the exception's type, the exception kept as the cause."""
    cause = ZeroDivisionError("division by zero")
    error = RuleCodeError("RatioRule", cause, step=4, location="my_rule.py, line 9")
    assert isinstance(error, ClientError) and error.exit_code is ExitCode.CLIENT_ERROR
    assert str(error) == (
        "rule RatioRule raised ZeroDivisionError: division by zero at step 4 (my_rule.py, line 9)"
    )
    assert (error.rule, error.step, error.location, error.error_type, error.__cause__) == (
        "RatioRule",
        4,
        "my_rule.py, line 9",
        "ZeroDivisionError",
        cause,
    )
    assert vars(cause) == {}  # the rule's exception is left as it was


def test_builtin_rule_error_is_ours() -> None:
    """A built-in rule that raised is an InternalServerError, with the same words."""
    error = BuiltinRuleError("DeadRelu", KeyError("w"))
    assert isinstance(error, InternalServerError) and error.exit_code is ExitCode.INTERNAL_ERROR
    assert (str(error), error.error_type, error.step) == (
        "rule DeadRelu raised KeyError: 'w'",
        "KeyError",
        None,
    )


def test_rule_failed_carries_the_step() -> None:
    """RuleFailed says at which step the rule raised, and what."""
    failed = RuleFailed(7, ValueError("bad"))
    assert (failed.step, str(failed.error)) == (7, "bad")
    assert str(failed) == "the rule raised ValueError at step 7: bad"
