"""The rule framework: ``Rule``, ``RequiredTensors``, ``invoke_rule`` and the actions.

smdebug-compatible (``smdebug.rules``); the differences are in docs/compatibility.md, "Rules".
"""

from evaluator.rules.actions import Actions
from evaluator.rules.invoker import (
    InvokeResult,
    NullObserver,
    RuleObserver,
    Termination,
    invoke_rule,
)
from evaluator.rules.required_tensors import RequiredTensors
from evaluator.rules.rule import Rule

__all__ = [
    "Actions",
    "InvokeResult",
    "NullObserver",
    "RequiredTensors",
    "Rule",
    "RuleObserver",
    "Termination",
    "invoke_rule",
]
