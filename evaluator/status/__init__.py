"""Rule statuses, the texts SageMaker shows for them, exit codes, status files and logging: the
vocabulary of a run's outcome, below the outputs that use it (``evaluator.sinks``) and the
reporter that tells them (``evaluator.reporting``).

* ``outcome``: how a rule ends (``RuleStatus``, ``RuleOutcome``), the message texts, and the
  one exit code and status of several rules;
* ``files``: the message files and the result file, whose schema its docstring gives;
* ``resume``: what an earlier attempt of the same run recorded;
* ``logging``: ``configure_logging``;
* ``final``: the supervisor's last word when the evaluation ended without its own.

``configure_logging`` (structlog) is imported when first used, so the supervisor can write
status files without loading it. ``StatusReporter`` moved to ``evaluator.reporting``; its old
name here still works, with a ``DeprecationWarning``, until the next release.

The exit codes are ``evaluator.errors.ExitCode``; the ``EXIT_*`` names are its members under
their earlier names.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from evaluator.errors import ExitCode
from evaluator.status.files import (
    RESULT_FILE_NAME,
    EvidenceSource,
    write_status_files,
)
from evaluator.status.outcome import (
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

if TYPE_CHECKING:
    from evaluator.status.logging import configure_logging

__all__ = [
    "EXIT_CLIENT_ERROR",
    "EXIT_INTERNAL_ERROR",
    "EXIT_ISSUES_FOUND",
    "EXIT_NO_ISSUES",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "MESSAGE_LIMIT",
    "RESULT_FILE_NAME",
    "STOPPED_MESSAGE",
    "EvidenceSource",
    "ExitCode",
    "RuleOutcome",
    "RuleStatus",
    "client_error_message",
    "combined_message",
    "condition_met_message",
    "configure_logging",
    "internal_error_message",
    "overall_exit_code",
    "overall_status",
    "truncate_utf8",
    "write_status_files",
]

EXIT_NO_ISSUES = ExitCode.NO_ISSUES
EXIT_ISSUES_FOUND = ExitCode.ISSUES_FOUND
EXIT_CLIENT_ERROR = ExitCode.CLIENT_ERROR
EXIT_INTERNAL_ERROR = ExitCode.INTERNAL_ERROR
EXIT_SIGINT = ExitCode.SIGINT
EXIT_SIGTERM = ExitCode.SIGTERM


def __getattr__(name: str) -> Any:
    """``configure_logging``, imported on first use; ``StatusReporter``'s old name."""
    if name == "StatusReporter":
        # Deprecated: the only import of a higher layer here, at first use of the old name
        # (tests/unit/test_import_layers.py, DEPRECATED_ALIASES). Remove in the next release.
        warnings.warn(
            "evaluator.status.StatusReporter moved: import it from evaluator.reporting",
            DeprecationWarning,
            stacklevel=2,
        )
        from evaluator.reporting import StatusReporter

        return StatusReporter
    if name == "configure_logging":
        from evaluator.status.logging import configure_logging

        return configure_logging
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
