"""Deprecated import name, kept for one release: ``evaluator.trial.columns`` moved to
``evaluator.engine.columns`` (the engine every input format shares, docs/formats.md)."""

from __future__ import annotations

import warnings

from evaluator.engine.columns import *  # noqa: F403
from evaluator.engine.columns import __all__ as __all__

warnings.warn(
    "evaluator.trial.columns is deprecated: import evaluator.engine.columns",
    DeprecationWarning,
    stacklevel=2,
)
