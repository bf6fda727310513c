"""Hatch build hook: ship a .pth line that makes the ``smdebug`` import names resolve to ours.

The line puts ``evaluator/compat/shim`` at the *end* of ``sys.path``: when the real smdebug is
installed, it is found first and nothing changes; when it is not, ``import smdebug.trials``
finds our shim package. See docs/compatibility.md, "smdebug import names".
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PTH_NAME = "debugger_rule_evaluator_smdebug.pth"
SHIM_DIR = os.path.join("evaluator", "compat", "shim")


class SmdebugShimHook(BuildHookInterface[BuilderConfig]):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            line = os.path.join(self.root, SHIM_DIR)
            key = "force_include_editable"
        else:
            line = SHIM_DIR  # relative lines in .pth files are relative to site-packages
            key = "force_include"
        fd, path = tempfile.mkstemp(suffix=".pth")
        with os.fdopen(fd, "w") as f:
            f.write(line + "\n")
        build_data.setdefault(key, {})[path] = PTH_NAME
