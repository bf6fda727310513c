"""What a rule's failure is reported as: our errors and smdebug's as they are, anything else
as the user's ``RuleCodeError`` (with the file and line) or our ``BuiltinRuleError``; and the
error a trial that cannot be opened is reported with."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from evaluator.config import RuleSpec
from evaluator.errors import (
    BuiltinRuleError,
    ClientError,
    ConfigurationError,
    EvaluatorError,
    MissingCollectionFiles,
    RuleCodeError,
    RuleFailed,
    SMDebugError,
)

__all__ = ["rule_failure", "trial_error"]


def rule_failure(spec: RuleSpec, error: BaseException) -> BaseException:
    """The error to report when a rule raised (``RuleFailed`` says at which step): ours and
    smdebug's as they are; anything else as a ``RuleCodeError`` (a user's rule, with the file
    and line) or a ``BuiltinRuleError`` (ours)."""
    step = None
    if isinstance(error, RuleFailed):
        step, error = error.step, error.error
    if isinstance(error, (EvaluatorError, SMDebugError)):
        return error
    if not spec.source:
        return BuiltinRuleError(spec.name, error, step=step)
    frame = _user_frame(error)
    location = None if frame is None else f"{Path(frame.filename).name}, line {frame.lineno}"
    return RuleCodeError(spec.name, error, step=step, location=location)


def _user_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame in the user's rule code (a module the loader imported)."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if Path(f.filename).name != "__init__.py" and "user_rule_" in _module_of(f.filename)
    ]
    return frames[-1] if frames else None


def _module_of(filename: str) -> str:
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name
    return ""


def trial_error(error: Exception, trial: str) -> Exception:
    if isinstance(error, ConfigurationError):
        return error
    if isinstance(error, MissingCollectionFiles):
        return ClientError(
            f"No debugging data was saved by the training job at {trial}. Check that the "
            "debugger hook was configured correctly (DebugHookConfig.S3OutputPath, or the "
            "hook's out_dir) before starting the training job. Exception: " + str(error)
        )
    if isinstance(error, (EvaluatorError, SMDebugError)):
        return ClientError(f"cannot read the trial at {trial}: {error}")
    return error
