"""smdebug.core.logger: ``get_logger``."""

from __future__ import annotations

import logging

__all__ = ["get_logger"]


def get_logger(name: str = "smdebug") -> logging.Logger:
    """The logger ``name`` (smdebug's scripts log through ``get_logger()``)."""
    return logging.getLogger(name)
