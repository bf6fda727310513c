"""smdebug.rules.rule"""

from evaluator.rules import Rule

__all__ = ["Rule"]
