"""smdebug.trials.utils: ``create_trial``."""

from smdebug.trials import create_trial

__all__ = ["create_trial"]
