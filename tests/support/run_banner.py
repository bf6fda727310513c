"""Lines for a banner at the end of a test run (the container image's size, or why the
container tests did not run), from whichever process ran the tests.

Under pytest-xdist the tests run in worker processes and only the controller prints the
summary: each worker hands its lines over in ``config.workeroutput`` when its session ends,
and the controller gathers them as each worker goes down (``tests/conftest.py`` holds the
hooks). Without xdist the same list is filled and printed in one process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KEY", "add", "gather", "hand_over", "lines"]

KEY = "run_banner_lines"
_lines: list[str] = []


def add(line: str) -> None:
    """Add a line once (several tests may meet the same reason to skip)."""
    if line not in _lines:
        _lines.append(line)


def lines() -> list[str]:
    return list(_lines)


def hand_over(config: Any) -> None:
    """In an xdist worker: pass this process's lines to the controller."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output[KEY] = list(_lines)


def gather(node: Any) -> None:
    """In the xdist controller: take the lines of a worker that went down."""
    for line in getattr(node, "workeroutput", {}).get(KEY, []):
        add(line)
