"""Deprecated import name, kept for one release: ``evaluator.trial.options`` moved to
``evaluator.engine.options`` (the engine every input format shares, docs/formats.md)."""

from __future__ import annotations

import warnings

from evaluator.engine.options import *  # noqa: F403
from evaluator.engine.options import __all__ as __all__

warnings.warn(
    "evaluator.trial.options is deprecated: import evaluator.engine.options",
    DeprecationWarning,
    stacklevel=2,
)
