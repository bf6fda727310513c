"""The smdebug-compatible Trial / Tensor API over the trial cache."""

from evaluator.trial.create import create_trial
from evaluator.trial.tensor import Tensor
from evaluator.trial.trial import Trial

__all__ = ["Tensor", "Trial", "create_trial"]
