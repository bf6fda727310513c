"""Every test here imports ``smdebug.*``: make sure those names are ours in this process."""

from __future__ import annotations

from evaluator.compat import activate

activate()
