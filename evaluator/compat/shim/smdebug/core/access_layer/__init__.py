"""smdebug.core.access_layer: ``has_training_ended``."""

from .utils import has_training_ended

__all__ = ["has_training_ended"]
