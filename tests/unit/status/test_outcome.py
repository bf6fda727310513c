"""Status texts, outcomes and the exit code of several rules."""

from __future__ import annotations

import signal

import pytest

from evaluator.errors import ConfigurationError, InternalServerError, MissingCollectionFiles
from evaluator.status import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    MESSAGE_LIMIT,
    STOPPED_MESSAGE,
    RuleOutcome,
    RuleStatus,
    client_error_message,
    combined_message,
    condition_met_message,
    internal_error_message,
    overall_exit_code,
    overall_status,
    truncate_utf8,
)


def test_condition_met_text_is_exact() -> None:
    """IssuesFound carries SageMaker's observed StatusDetails text, newline included."""
    assert condition_met_message("VanishingGradient", 500) == (
        "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 "
        "resulted in the condition being met\n"
    )


def test_error_prefixes_are_exact() -> None:
    """Client and internal errors are prefixed as SageMaker shows them; Stopped is bare."""
    assert client_error_message("bad") == "ClientError: bad"
    assert internal_error_message("bug") == "InternalServerError: bug"
    assert STOPPED_MESSAGE == "Stopped"


def test_status_values() -> None:
    """The status strings are SageMaker's RuleEvaluationStatus values."""
    assert [s.value for s in RuleStatus] == [
        "InProgress",
        "IssuesFound",
        "NoIssuesFound",
        "Error",
        "Stopped",
    ]


def test_finished_outcomes() -> None:
    """A rule that fired ends IssuesFound at its first firing step; otherwise NoIssuesFound."""
    fired = RuleOutcome.finished("Overfit", [7200, 7300])
    assert (fired.status, fired.exit_code, fired.step, fired.fired_steps) == (
        RuleStatus.ISSUES_FOUND,
        1,
        7200,
        (7200, 7300),
    )
    assert fired.message == condition_met_message("Overfit", 7200)
    quiet = RuleOutcome.finished("Overfit", [], last_step=99)
    assert (quiet.status, quiet.exit_code, quiet.step, quiet.message) == (
        RuleStatus.NO_ISSUES_FOUND,
        0,
        99,
        None,
    )


@pytest.mark.parametrize(
    ("error", "client", "code", "message"),
    [
        (
            ConfigurationError("start_step must be ..."),
            None,
            2,
            "ClientError: start_step must be ...",
        ),
        (InternalServerError("cache broke"), None, 3, "InternalServerError: cache broke"),
        (
            MissingCollectionFiles(),
            None,
            2,
            "ClientError: MissingCollectionFiles: Training job has "
            "ended. All the collection files could not be loaded",
        ),
        (KeyError("x"), None, 3, "InternalServerError: KeyError: 'x'"),
        (
            ValueError("could not convert string to float: 'a'"),
            True,
            2,
            "ClientError: ValueError: could not convert string to float: 'a'",
        ),
        (RuntimeError(), True, 2, "ClientError: RuntimeError"),
    ],
)
def test_error_outcomes(error: BaseException, client: bool | None, code: int, message: str) -> None:
    """Our errors carry their category; smdebug's are the data's; others ours unless told."""
    outcome = RuleOutcome.from_error("R", error, client=client)
    assert (outcome.status, outcome.exit_code, outcome.message) == (RuleStatus.ERROR, code, message)
    assert outcome.error_type == type(error).__name__


def test_traceback_kept_for_foreign_exceptions_only() -> None:
    """A traceback is kept for exceptions from rule code, not for our own explained errors."""
    try:
        raise ValueError("boom")
    except ValueError as e:
        assert "raise ValueError" in (RuleOutcome.from_error("R", e, client=True).traceback or "")
    assert RuleOutcome.from_error("R", ConfigurationError("x")).traceback is None


def test_stopped_exit_codes() -> None:
    """Stopped exits 143 on SIGTERM and 130 on SIGINT."""
    assert RuleOutcome.stopped("R", signal.SIGTERM).exit_code == EXIT_SIGTERM == 143
    assert RuleOutcome.stopped("R", signal.SIGINT).exit_code == EXIT_SIGINT == 130


def test_truncate_keeps_short_text() -> None:
    """Text within the limit is unchanged."""
    assert truncate_utf8("é" * 10) == "é" * 10


def test_truncate_cuts_at_a_character_boundary() -> None:
    """Long text is cut to at most 1024 UTF-8 bytes, keeps its head, and says it was cut."""
    text = "ClientError: " + "ü€" * 1000
    cut = truncate_utf8(text)
    data = cut.encode("utf-8")
    assert len(data) <= MESSAGE_LIMIT
    assert cut.startswith("ClientError: ü€") and cut.endswith("[truncated]")
    data.decode("utf-8")  # valid UTF-8


NO = RuleOutcome.finished("a", [])
FIRED = RuleOutcome.finished("b", [3])
CLIENT = RuleOutcome.from_error("c", ConfigurationError("bad"))
INTERNAL = RuleOutcome.from_error("d", InternalServerError("bug"))
STOPPED = RuleOutcome.stopped("e", signal.SIGTERM)


@pytest.mark.parametrize(
    ("outcomes", "code", "status"),
    [
        ([], 0, RuleStatus.NO_ISSUES_FOUND),
        ([NO, NO], 0, RuleStatus.NO_ISSUES_FOUND),
        ([NO, FIRED], 1, RuleStatus.ISSUES_FOUND),
        ([FIRED, CLIENT], 2, RuleStatus.ERROR),
        ([CLIENT, INTERNAL, FIRED], 3, RuleStatus.ERROR),
        ([INTERNAL, STOPPED, FIRED], 143, RuleStatus.STOPPED),
        ([NO, RuleOutcome.stopped("e", signal.SIGINT)], 130, RuleStatus.STOPPED),
    ],
)
def test_overall_exit_code(outcomes: list[RuleOutcome], code: int, status: RuleStatus) -> None:
    """Most severe wins: signal stop > internal > client > issues found > no issues."""
    assert overall_exit_code(outcomes) == code
    assert overall_status(outcomes) is status


def test_combined_message() -> None:
    """One rule's message is kept exactly; several go one per line, most severe first."""
    assert combined_message([NO]) is None
    assert combined_message([NO, FIRED]) == FIRED.message
    assert combined_message([CLIENT]) == "ClientError: bad"
    assert combined_message([FIRED, CLIENT]) == "ClientError: bad\n" + str(FIRED.message)


def test_combined_message_is_cut_to_the_limit() -> None:
    """The text for SageMaker never exceeds its 1 KB."""
    many = [RuleOutcome.finished(f"Rule{i}", [i]) for i in range(30)]
    assert len((combined_message(many) or "").encode()) <= MESSAGE_LIMIT
