"""smdebug import names, served by the open-source rule evaluator (evaluator.compat).

This package is found only when the real smdebug is not installed: the evaluator's .pth line
puts its folder at the end of sys.path. See docs/compatibility.md, "smdebug import names".
"""

from evaluator.modes import ModeKeys as modes  # smdebug exposes ModeKeys as smdebug.modes

__version__ = "1.0.34"
__evaluator_shim__ = True

__all__ = ["modes"]
