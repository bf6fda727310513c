"""smdebug.trials.local_trial: ``LocalTrial``."""

from smdebug.trials import LocalTrial

__all__ = ["LocalTrial"]
