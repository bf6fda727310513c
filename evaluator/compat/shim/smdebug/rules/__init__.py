"""smdebug.rules: ``Rule`` and ``invoke_rule``."""

from evaluator.rules import Rule, invoke_rule

__all__ = ["Rule", "invoke_rule"]
