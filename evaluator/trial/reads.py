"""Deprecated import name, kept for one release: ``evaluator.trial.reads`` moved to
``evaluator.engine.reads`` (the engine every input format shares, docs/formats.md)."""

from __future__ import annotations

import warnings

from evaluator.engine.reads import *  # noqa: F403
from evaluator.engine.reads import __all__ as __all__

warnings.warn(
    "evaluator.trial.reads is deprecated: import evaluator.engine.reads",
    DeprecationWarning,
    stacklevel=2,
)
