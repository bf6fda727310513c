"""smdebug.core.writer: ``FileWriter``, one worker's files of one step, in smdebug's format.

For scripts and tests that write small trials with smdebug's low-level writer (its own analysis
tests do). Local folders only; the training hooks are not provided (docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any

from evaluator.errors import SMDebugNotImplementedError, SMDebugValueError
from evaluator.modes import ModeKeys
from evaluator.storage.schemes import is_remote
from evaluator.testing.writer import StepWriter

from .utils import make_numpy_array

__all__ = ["FileWriter"]


class FileWriter:
    """``FileWriter(trial_dir, worker, step=0)``: ``write_tensor`` any number of times, then
    ``close`` (or use ``with``); the event file and then the index file appear on close."""

    def __init__(
        self,
        trial_dir: str,
        worker: str,
        step: int = 0,
        wtype: str = "events",
        mode: ModeKeys = ModeKeys.GLOBAL,
        **_queue_options: Any,
    ) -> None:
        if wtype != "events":
            raise SMDebugValueError(f"Writer type not supported {wtype}")
        if is_remote(str(trial_dir)):
            raise SMDebugNotImplementedError(
                "this FileWriter writes local folders only: write the trial locally, then upload it"
            )
        self.trial_dir = trial_dir
        self.worker = worker
        self.step = step
        self.wtype = wtype
        self.mode = mode
        self._step_writer = StepWriter(trial_dir, step, worker=worker)

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_tensor(
        self,
        tdata: Any,
        tname: str,
        write_index: bool = True,
        mode: ModeKeys | None = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        timestamp: float | None = None,
    ) -> None:
        """Save ``tdata`` (an array, a scalar, a list …) as ``tname`` at this step; ``mode``
        None is GLOBAL and ``mode_step`` None is the global step, as in smdebug."""
        if not write_index:
            raise SMDebugNotImplementedError("records without an index entry are not written")
        self._step_writer.write_tensor(
            make_numpy_array(tdata),
            tname,
            mode=ModeKeys.GLOBAL if mode is None else mode,
            mode_step=mode_step,
            wall_time=timestamp,
        )

    def flush(self) -> None:
        """Nothing is written before ``close``; kept for smdebug's API."""

    def close(self) -> None:
        self._step_writer.close()
