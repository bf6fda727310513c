"""smdebug.rules.rule_invoker: ``invoke_rule``."""

from evaluator.rules import invoke_rule

__all__ = ["invoke_rule"]
