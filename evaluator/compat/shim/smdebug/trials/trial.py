"""smdebug.trials.trial: ``Trial``."""

from evaluator.trial import Trial

__all__ = ["Trial"]
