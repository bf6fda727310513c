"""Hugging Face ``Trainer`` output as an input format: the ``trainer_state.json`` of a checkpoint
folder (or of an output folder of ``checkpoint-*`` folders, or the one ``save_state`` leaves at
its root), read as the TensorBoard log the Trainer's own TensorBoard callback writes for the same
run (docs/huggingface.md).

``evaluator.formats.trainer_state`` turns the file's ``log_history`` into the scalars that
callback logs (``train/loss``, ``eval/loss``, ``train/grad_norm``, ... at each entry's step), as
float32 as a TensorBoard file holds them; ``TrainerStateSource`` applies them to one folder of a
``TensorBoardSource`` and hands them on exactly as that source hands on a log: the same tags,
modes, global steps and collections, so a rule's verdict on a run's trainer state is its verdict
on the run's TensorBoard log.

Every scan lists the ``trainer_state.json`` files, reads those that are new or changed, and
follows the newest (the largest ``global_step``: a live run's next checkpoint is picked up). Its
history is applied from where the last one left off; a newest state whose history departs from
what was applied (a run resumed from an earlier checkpoint) is applied again from the first step
where they differ, as TensorBoard drops the orphaned steps of a restarted job. The run has ended
when the newest state holds the entry ``Trainer.train`` logs at the end (``train_runtime``), or
at the end marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from evaluator.engine.gcpause import gc_paused
from evaluator.engine.options import TrialOptions
from evaluator.engine.source import IndexScan, StepRange
from evaluator.errors import ClientError
from evaluator.formats.keys import index_key
from evaluator.formats.tensorboard.summary import ParsedEvent, SummaryDatum
from evaluator.formats.trainer_state import (
    STATE_FILE,
    TrainerState,
    TrainerStateError,
    parse_trainer_state,
)
from evaluator.sources.registry import SourceFormat
from evaluator.sources.tensorboard.source import WORKER, TensorBoardSource
from evaluator.sources.tensorboard.steps import apply_event
from evaluator.storage.base import ObjectInfo, Storage

__all__ = ["FORMAT", "STATE_FILE", "TrainerStateSource"]

REREAD_SECONDS = 0.2  # a new state that does not parse is read again after this long
_ROOT = ""  # the one folder the scalars go to: the run's own, as the callback writes them
_SYNTHETIC_LOG = "events.out.tfevents.trainer_state"  # maps the run as a log at the root


def is_state_file(key: str) -> bool:
    return posixpath.basename(key) == STATE_FILE


@dataclass
class _Read:
    size: int
    state: TrainerState


class TrainerStateSource(TensorBoardSource):
    """A ``TensorBoardSource`` whose records come from ``trainer_state.json`` files."""

    kind = "trainer_state"

    def __init__(self, storage: Storage, *, options: TrialOptions | None = None) -> None:
        super().__init__(storage, options=options)
        self._read: dict[str, _Read] = {}
        self._applied: list[tuple[str, int, float]] = []  # the scalars applied, in order
        self._following: str | None = None
        self._finished = False

    def describe(self) -> dict[str, Any]:
        found = super().describe()
        found["kind"] = "Hugging Face trainer state (trainer_state.json)"
        if self._following is not None:
            found["file"] = self._following
        found["end_marker"] = "the Trainer's end-of-training log entry (train_runtime)"
        return found

    async def training_ended(self) -> bool:
        return self._finished or await super().training_ended()

    async def _event_files(self) -> list[ObjectInfo]:
        """The trainer states (they stand for event files while the source waits for one)."""
        pages = cast(AsyncGenerator[ObjectInfo, None], self.storage.list_after(""))
        async with contextlib.aclosing(pages) as listing:
            return [o async for o in listing if is_state_file(o.key)]

    def _map(self, keys: list[str]) -> None:
        super()._map([_SYNTHETIC_LOG])  # one run, its own folder: the callback's layout

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        """Follow the newest trainer state, apply what its history gained, hand on the
        steps it brought."""
        newest = await self._newest()
        if newest is not None:
            with gc_paused():
                self._apply(newest)
        files = self._hand_on(range_steps)
        end = with_end_marker and await self.training_ended()
        last = index_key(self._last_step, WORKER) if self._last_step >= 0 else None
        return IndexScan(files, last, end_marker=end)

    async def _newest(self) -> TrainerState | None:
        """The state with the largest global step among the listed ones (read again only
        when a file changed size); None when there is none."""
        listed = await self._event_files()
        for obj in listed:
            known = self._read.get(obj.key)
            if known is None or known.size != obj.size:
                state = await self._parse(obj.key, retry=known is None)
                if state is not None:
                    self._read[obj.key] = _Read(obj.size, state)
        present = {o.key for o in listed}
        candidates = [(k, r.state) for k, r in self._read.items() if k in present]
        if not candidates:
            return None
        key, state = max(candidates, key=lambda c: (c[1].global_step or -1, len(c[1].scalars)))
        self._following = key
        return state

    async def _parse(self, key: str, *, retry: bool) -> TrainerState | None:
        """The state in ``key``; None for a file that changed and does not parse (caught while
        the Trainer rewrites it: read again next scan). A file seen for the first time that
        does not parse is read once more after ``REREAD_SECONDS``, then is a ClientError."""
        where = f"{self.storage.uri.rstrip('/')}/{key}"
        for attempt in (1, 2):
            data = await self.storage.read(key)
            try:
                return parse_trainer_state(data, source=where)
            except TrainerStateError as e:
                if not retry:
                    return None
                if attempt == 2:
                    raise ClientError(str(e)) from None
            await asyncio.sleep(REREAD_SECONDS)
        return None

    def _apply(self, state: TrainerState) -> None:
        """Apply the scalars of ``state`` not applied yet; from the first that differs, when
        its history departs from what was applied."""
        folder = self._folders[_ROOT]
        folder.file_version = folder.file_version or 2.0  # a repeated step replaces
        new = state.scalars
        applied = self._applied
        same = _common_prefix(applied, new)
        if same < len(applied):  # a resumed run: drop what the old history said from there
            step = applied[same][1] if same >= len(new) else min(applied[same][1], new[same][1])
            folder.purge(step, None)
            same = _first_at_step(new, step)
        for tag, step, value in new[same:]:
            datum = SummaryDatum(tag, "scalar", np.float32(value))
            apply_event(
                folder, ParsedEvent(step, 0.0, "summary", [datum]), folder.order, self._tags
            )
            folder.order += 1
        self._applied = list(new)
        self._finished = state.finished


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _first_at_step(scalars: list[tuple[str, int, float]], step: int) -> int:
    """The index of the first scalar at or after ``step``."""
    return next((i for i, (_, s, _) in enumerate(scalars) if s >= step), len(scalars))


def _make(storage: Storage, options: TrialOptions) -> TrainerStateSource:
    return TrainerStateSource(storage, options=options)


FORMAT = SourceFormat("trainer_state", is_state_file, _make)
