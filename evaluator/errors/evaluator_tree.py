"""The evaluator's own exceptions: who must act (``ExitCode``) and what the result file calls
them (``error_type``); see ``evaluator.errors`` for the picture."""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

# --------------------------------------------------------------------------------------------
# The evaluator's operational tree: status prefix and exit code per class.


class ExitCode(IntEnum):
    """The evaluator's exit codes, one per outcome (README, "Statuses and exit codes")."""

    NO_ISSUES = 0
    ISSUES_FOUND = 1
    CLIENT_ERROR = 2
    INTERNAL_ERROR = 3
    SIGINT = 130  # stopped: 128 + the signal number
    SIGTERM = 143

    @staticmethod
    def stopped_by(signum: int) -> int:
        """The exit code of a run stopped by signal ``signum`` (the shell's convention)."""
        return 128 + signum


class EvaluatorError(Exception):
    """Base of the evaluator's own failures. ``error_type`` is the type name to report: the
    class's own unless the constructor is given another."""

    status_prefix: ClassVar[str] = "InternalServerError"
    exit_code: ClassVar[ExitCode] = ExitCode.INTERNAL_ERROR

    def __init__(self, *args: object, error_type: str | None = None) -> None:
        super().__init__(*args)
        self.error_type = error_type or type(self).__name__


class ClientError(EvaluatorError):
    """Something the user gave or controls is wrong; the message says what to fix."""

    status_prefix = "ClientError"
    exit_code = ExitCode.CLIENT_ERROR


class InternalServerError(EvaluatorError):
    """A bug in the evaluator."""


class ConfigurationError(ClientError):
    """A parameter, flag or configuration file is invalid."""


class StorageError(ClientError):
    """Reading the trial's storage failed. ``uri`` names what was being read; ``unreachable``:
    the endpoint never answered (opening the trial again would only wait as long again)."""

    def __init__(self, message: str, *, uri: str | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.uri = uri
        self.unreachable = unreachable


class ObjectNotFound(StorageError):
    """The key or file does not exist."""


class AccessDenied(StorageError):
    """The credentials lack a permission; the message names the URI and the permission."""


class BucketNotFound(StorageError):
    """The S3 bucket does not exist."""


class _RuleRaised(EvaluatorError):
    """A rule's code raised ``error``, an exception that is neither ours nor smdebug's: the
    message names the rule, the exception, the ``step`` and the ``location`` (file and line)
    when known; ``error_type`` is the exception's type name and ``__cause__`` the exception."""

    def __init__(
        self,
        rule: str,
        error: BaseException,
        *,
        step: int | None = None,
        location: str | None = None,
    ) -> None:
        where = "" if step is None else f" at step {step}"
        where += "" if location is None else f" ({location})"
        name = type(error).__name__
        super().__init__(f"rule {rule} raised {name}: {error}{where}", error_type=name)
        self.rule = rule
        self.step = step
        self.location = location
        self.__cause__ = error


class RuleCodeError(_RuleRaised, ClientError):
    """A user's rule raised: its author must fix it (exit 2)."""


class BuiltinRuleError(_RuleRaised, InternalServerError):
    """A built-in rule raised: our bug (exit 3)."""


# --------------------------------------------------------------------------------------------
# Between our own layers.


class RuleFailed(Exception):
    """Raised by ``invoke_rule(..., wrap_errors=True)``: the rule raised ``error`` (also the
    ``__cause__``) when invoked at ``step``. The evaluation reports ``error`` itself."""

    def __init__(self, step: int, error: BaseException) -> None:
        super().__init__(step, error)
        self.step = step
        self.error = error

    def __str__(self) -> str:
        return f"the rule raised {type(self.error).__name__} at step {self.step}: {self.error}"


class StopRequested(BaseException):
    """Raised in the main thread by a stop signal (SIGTERM/SIGINT) that arrives while nothing
    polls the stop flag (reading the configuration, opening the trial, building the rules).
    Not an error: code that reports what a rule raised lets it pass."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
