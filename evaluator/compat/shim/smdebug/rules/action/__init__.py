"""smdebug.rules.action: ``Actions``."""

from evaluator.rules import Actions

__all__ = ["Actions"]
