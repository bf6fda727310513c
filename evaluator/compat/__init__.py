"""smdebug compatibility: the ``smdebug.*`` import names, served by this package.

Installing the evaluator adds one line to site-packages (``debugger_rule_evaluator_smdebug.pth``)
that appends ``evaluator/compat/shim`` to the *end* of ``sys.path``. A script written for
smdebug then runs unchanged: ``import smdebug.trials`` finds our shim when the real smdebug is
not installed, and finds the real one, untouched, when it is.

Inside the evaluator, rules must get ours even if the real smdebug is installed too;
``activate()`` puts the shim first for the rest of the process.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["SHIM_DIR", "activate", "is_active"]

SHIM_DIR = str(Path(__file__).resolve().parent / "shim")


def activate() -> None:
    """Make ``import smdebug...`` resolve to our implementation in this process."""
    if sys.path[:1] != [SHIM_DIR]:
        while SHIM_DIR in sys.path:
            sys.path.remove(SHIM_DIR)
        sys.path.insert(0, SHIM_DIR)
    loaded = sys.modules.get("smdebug")
    if loaded is not None and not getattr(loaded, "__evaluator_shim__", False):
        for name in [n for n in sys.modules if n == "smdebug" or n.startswith("smdebug.")]:
            del sys.modules[name]


def is_active() -> bool:
    """Whether ``import smdebug`` gives our implementation."""
    try:
        import smdebug
    except ImportError:
        return False
    return bool(getattr(smdebug, "__evaluator_shim__", False))
