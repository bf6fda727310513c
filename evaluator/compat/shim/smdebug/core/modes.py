"""smdebug.core.modes"""

from evaluator.modes import ALLOWED_MODES, ModeKeys

ALLOWED_MODE_NAMES = [m.name for m in ALLOWED_MODES]
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"

__all__ = [
    "ALLOWED_MODES",
    "ALLOWED_MODE_NAMES",
    "MODE_PLUGIN_NAME",
    "MODE_STEP_PLUGIN_NAME",
    "ModeKeys",
]
