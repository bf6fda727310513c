"""Deprecated import name, kept for one release: ``evaluator.trial.runner`` moved to
``evaluator.engine.runner`` (the engine every input format shares, docs/formats.md)."""

from __future__ import annotations

import warnings

from evaluator.engine.runner import *  # noqa: F403
from evaluator.engine.runner import __all__ as __all__

warnings.warn(
    "evaluator.trial.runner is deprecated: import evaluator.engine.runner",
    DeprecationWarning,
    stacklevel=2,
)
