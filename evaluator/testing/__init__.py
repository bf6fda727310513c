"""Test doubles and helpers we ship: write smdebug-format trials from numpy arrays.

See ``evaluator.testing.writer`` for an example.
"""

from evaluator.testing.writer import StepWriter, TrialWriter, compute_reductions

__all__ = ["StepWriter", "TrialWriter", "compute_reductions"]
