"""Deprecated import name, kept for one release: ``evaluator.trial.cache`` moved to
``evaluator.engine.cache`` (the engine every input format shares, docs/formats.md)."""

from __future__ import annotations

import warnings

from evaluator.engine.cache import *  # noqa: F403
from evaluator.engine.cache import __all__ as __all__

warnings.warn(
    "evaluator.trial.cache is deprecated: import evaluator.engine.cache",
    DeprecationWarning,
    stacklevel=2,
)
