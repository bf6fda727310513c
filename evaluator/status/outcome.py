"""How a rule ends: its status, exit code and the text SageMaker shows (DESIGN §5).

=================  =====  ==============================================================
status             exit   message text (``/opt/ml/output/message`` and ``failure``)
=================  =====  ==============================================================
``NoIssuesFound``  0      none
``IssuesFound``    1      ``RuleEvaluationConditionMet: Evaluation of the rule <Rule> at
                          step <N> resulted in the condition being met`` + newline
``Error``          2      ``ClientError: <message>`` (the user must fix something)
``Error``          3      ``InternalServerError: <message>`` (our bug)
``Stopped``        143    ``Stopped`` (SIGTERM; 130 for SIGINT: 128 + the signal number)
=================  =====  ==============================================================

Texts are UTF-8 and cut to SageMaker's 1 KB (``MESSAGE_LIMIT``) at a character boundary.

**Several rules, one exit code.** The most severe outcome wins, in this order: a stop by a
signal (the process was told to end; the other verdicts are incomplete) > internal error (a
verdict may be wrong) > client error (a verdict is missing) > issues found > no issues. The
message file then holds every non-empty rule message, most severe first, one per line.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from evaluator.errors import EvaluatorError, ExitCode, SMDebugError
from evaluator.modes import WriterStep

__all__ = [
    "MESSAGE_LIMIT",
    "STOPPED_MESSAGE",
    "RuleOutcome",
    "RuleStatus",
    "client_error_message",
    "combined_message",
    "condition_met_message",
    "internal_error_message",
    "overall_exit_code",
    "overall_status",
    "truncate_utf8",
]

MESSAGE_LIMIT = 1024
STOPPED_MESSAGE = "Stopped"
_TRUNCATED = " ...[truncated]"


class RuleStatus(str, Enum):
    """SageMaker's RuleEvaluationStatus values a rule container can end in."""

    IN_PROGRESS = "InProgress"
    ISSUES_FOUND = "IssuesFound"
    NO_ISSUES_FOUND = "NoIssuesFound"
    ERROR = "Error"
    STOPPED = "Stopped"


def condition_met_message(rule: str, step: int | WriterStep) -> str:
    """SageMaker's text; a step the writer logged in a mode (``WriterStep``) is followed by
    its mode: ``at step 100 (EVAL)``."""
    shown = step if isinstance(step, WriterStep) else WriterStep(step)
    mode = f" ({shown.mode.name})" if shown.mode is not None else ""
    return (
        f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {shown.step}{mode} "
        "resulted in the condition being met\n"
    )


def client_error_message(text: str) -> str:
    return f"ClientError: {text}"


def internal_error_message(text: str) -> str:
    return f"InternalServerError: {text}"


def truncate_utf8(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and a marker, within the
    limit and without splitting a character."""
    data = text.encode("utf-8", errors="backslashreplace")
    if len(data) <= limit:
        return text
    head = data[: max(0, limit - len(_TRUNCATED))].decode("utf-8", errors="ignore")
    return head + _TRUNCATED


@dataclass(frozen=True)
class RuleOutcome:
    """How one rule ended. ``exit_code`` is a plain int (an ``ExitCode`` value, or 128 + the
    signal number), as logs and the result file show it."""

    rule: str
    status: RuleStatus
    exit_code: int
    step: int | None = None
    fired_steps: tuple[int, ...] = ()
    message: str | None = None  # the StatusDetails text; None for NoIssuesFound
    error_type: str | None = None
    traceback: str | None = None

    @classmethod
    def finished(
        cls,
        rule: str,
        fired_steps: Sequence[int],
        *,
        last_step: int | None = None,
        shown: Callable[[int], WriterStep] = WriterStep,
    ) -> RuleOutcome:
        """IssuesFound at the first firing step if the rule fired, else NoIssuesFound. Steps
        are global; the message shows the first one as ``shown`` gives it (the writer's)."""
        if not fired_steps:
            return cls(rule, RuleStatus.NO_ISSUES_FOUND, ExitCode.NO_ISSUES.value, last_step)
        return cls(
            rule,
            RuleStatus.ISSUES_FOUND,
            ExitCode.ISSUES_FOUND.value,
            fired_steps[0],
            tuple(fired_steps),
            condition_met_message(rule, shown(fired_steps[0])),
        )

    @classmethod
    def from_error(
        cls, rule: str, error: BaseException, *, client: bool | None = None, step: int | None = None
    ) -> RuleOutcome:
        """Error. ``client`` forces the category (True for exceptions raised by a user's rule
        code); by default our errors carry their own, smdebug's are the data's fault (client),
        anything else is our bug."""
        ours = isinstance(error, EvaluatorError)
        if client is None:
            client = (
                error.exit_code == ExitCode.CLIENT_ERROR
                if isinstance(error, EvaluatorError)
                else isinstance(error, SMDebugError)
            )
        # Ours name the type to report (a rule's failure: the type of what the rule raised).
        name = error.error_type if isinstance(error, EvaluatorError) else type(error).__name__
        text = str(error) if ours else (f"{name}: {error}" if str(error) else name)
        message = client_error_message(text) if client else internal_error_message(text)
        # Our errors carry no traceback of their own; one that wraps a user's exception shows
        # that exception's traceback.
        shown = error.__cause__ if ours else error
        trace = None if shown is None else "".join(traceback.format_exception(shown))
        code = ExitCode.CLIENT_ERROR if client else ExitCode.INTERNAL_ERROR
        return cls(rule, RuleStatus.ERROR, code.value, step, (), message, name, trace)

    @classmethod
    def stopped(
        cls, rule: str, signum: int, *, step: int | None = None, fired_steps: Sequence[int] = ()
    ) -> RuleOutcome:
        return cls(
            rule,
            RuleStatus.STOPPED,
            ExitCode.stopped_by(signum),
            step,
            tuple(fired_steps),
            STOPPED_MESSAGE,
        )


_RANKS: dict[int, int] = {
    ExitCode.INTERNAL_ERROR: 4,
    ExitCode.CLIENT_ERROR: 3,
    ExitCode.ISSUES_FOUND: 2,
}


def _severity(outcome: RuleOutcome) -> int:
    if outcome.status is RuleStatus.STOPPED:
        return 5
    return _RANKS.get(outcome.exit_code, 1)


def _by_severity(outcomes: Iterable[RuleOutcome]) -> list[RuleOutcome]:
    return sorted(outcomes, key=_severity, reverse=True)  # stable: rule order within a rank


def overall_exit_code(outcomes: Iterable[RuleOutcome]) -> int:
    """The exit code of the most severe outcome (0 for none); see the module docstring."""
    ranked = _by_severity(outcomes)
    return ranked[0].exit_code if ranked else ExitCode.NO_ISSUES.value


def overall_status(outcomes: Iterable[RuleOutcome]) -> RuleStatus:
    ranked = _by_severity(outcomes)
    return ranked[0].status if ranked else RuleStatus.NO_ISSUES_FOUND


def combined_message(outcomes: Iterable[RuleOutcome]) -> str | None:
    """The message file's text: one rule's message as is, several one per line, most severe
    first; None when no rule has one. Cut to ``MESSAGE_LIMIT`` bytes."""
    # A message several rules share (a parameter no rule of the run takes) is said once.
    texts = list(dict.fromkeys(o.message for o in _by_severity(outcomes) if o.message))
    if not texts:
        return None
    text = (
        texts[0] if len(texts) == 1 else "".join(t if t.endswith("\n") else t + "\n" for t in texts)
    )
    return truncate_utf8(text)
