"""``DataProblems``: the event files a trial could not give, said once each and counted.

A step whose event file is missing, empty or torn is skipped by the rule (the read raises
``TensorUnavailableForStep``, as smdebug's). Skipping quietly would let a run with broken data
end ``NoIssuesFound`` as if every step had been checked, so each such file is logged once at
WARNING, counted, and listed (the first ``keep`` of them) for the result file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Literal

import structlog

__all__ = ["DataProblems", "Problem"]

log = structlog.get_logger("evaluator.trial")

Problem = Literal["missing", "empty", "truncated", "corrupt", "unreadable", "step_too_large"]


_ACTIONS = {
    "corrupt": "rest of the file skipped",
    "unreadable": "record skipped",
    "step_too_large": "record skipped",
}


class DataProblems:
    """Thread-safe record of one trial's unreadable event files."""

    def __init__(self, *, keep: int = 100, remember: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._keep = keep
        self._remember = remember  # files already reported, so one file is counted once
        self._listed: list[dict[str, Any]] = []
        self._seen: OrderedDict[str, int] = OrderedDict()  # file -> bytes it had
        self._count = 0

    def note(
        self,
        *,
        file: str,
        step: int,
        worker: str,
        problem: Problem,
        tensor: str,
        mode: str,
        detail: str,
        trial_complete: bool,
        size: int = 0,
        offset: int | None = None,
    ) -> bool:
        """Record one unreadable event file (``size``: the bytes it had, as far as known;
        ``offset``: where in it the bad record starts, when known); False (and nothing
        logged) if already recorded."""
        entry = {
            "file": file,
            "step": step,
            "worker": worker,
            "problem": problem,
            "tensor": tensor,
            "mode": mode,
            "detail": detail,
            "trial_complete": trial_complete,
        }
        if offset is not None:
            entry["offset"] = offset
        with self._lock:
            if file in self._seen:
                self._seen.move_to_end(file)
                self._seen[file] = size
                return False
            self._seen[file] = size
            if len(self._seen) > self._remember:
                self._seen.popitem(last=False)
            self._count += 1
            if len(self._listed) < self._keep:
                self._listed.append(entry)
        # a record skipped while reading goes on (a TensorBoard resynchronisation)
        action = "record skipped" if tensor == "(that record)" else _ACTIONS.get(problem)
        log.warning("data_problem", **entry, action=action or "step skipped")
        return True

    def known_size(self, file: str) -> int | None:
        """The bytes a recorded file had, None if it is not recorded (or long forgotten)."""
        with self._lock:
            return self._seen.get(file)

    @property
    def count(self) -> int:
        """Unreadable event files met so far (each counted once)."""
        with self._lock:
            return self._count

    def listed(self) -> list[dict[str, Any]]:
        """Copies of the first ``keep`` problems, in the order met."""
        with self._lock:
            return [dict(e) for e in self._listed]
