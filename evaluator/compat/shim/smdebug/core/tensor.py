"""smdebug.core.tensor"""

from evaluator.modes import StepState
from evaluator.trial.tensor import Tensor

__all__ = ["StepState", "Tensor"]
