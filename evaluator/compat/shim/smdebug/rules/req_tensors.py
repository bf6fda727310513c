"""smdebug.rules.req_tensors: ``RequiredTensors``."""

from evaluator.rules import RequiredTensors

__all__ = ["RequiredTensors"]
