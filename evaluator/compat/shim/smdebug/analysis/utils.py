"""smdebug.analysis.utils: ``no_refresh`` and ``refresh``."""

from evaluator.trial.refresh import no_refresh, refresh

__all__ = ["no_refresh", "refresh"]
