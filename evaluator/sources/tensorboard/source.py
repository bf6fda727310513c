"""The TensorBoard side of a trial: event files read as the same steps, tensors and collections.

``TensorBoardSource`` is a ``Source`` (``evaluator.engine.source``): collections, scans of new
steps, and the values, so the one ``Trial`` serves it as it serves smdebug output. Its scans tail every
``events.out.tfevents.*`` file of the run from the offset read last (one ranged read per file
that grew; a torn last record is read again from its start next time), parse the summaries
(many records at once: ``evaluator.formats.tensorboard.frames``, the rest through
``evaluator.formats.tensorboard.summary``) into per-tag columns (``columns``: scalars as numpy
columns, histograms as their exact statistics and buckets), and hand each scan's new steps
and the columns' snapshots to the trial at once (a ``StepBatch``; values are answered by
``values.HeldTensors``), not an index file per step.

Mapping (docs/tensorboard.md): tags are tensor names; a run is a folder with event files, with
its phase sub-folders (``train``/``training`` -> TRAIN, ``validation``/``val``/``eval``/``test``
-> EVAL, also as the last word: ``loss_train``), and, in the run's own folder, the phase words
of tags (``train/loss``, ``Loss/test``, ``val_loss``: the tensor ``loss`` of that mode; option
``tensorboard_tag_phases``, decided before the first step is handed on). With phases, mode steps are the event steps
and the global step is ``2 * step`` (TRAIN, or the run's own folder) or ``2 * step + 1``
(EVAL), so that a step's training values come before its validation values; without, the mode
is GLOBAL and the global step is the event step. Files of one folder are read in name order
(their names start with the time they were created); a value logged again for a step
(a restarted job) replaces the earlier one, and ``SessionLog.START`` at step ``s`` drops what
the folder logged at steps ``>= s``, as TensorBoard purges orphaned data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import structlog

from evaluator.engine.gcpause import gc_paused
from evaluator.engine.options import TrialOptions
from evaluator.engine.source import IndexScan, LoadedCollections, ParsedIndex, StepRange
from evaluator.engine.source_base import SourceBase
from evaluator.engine.waits import WaitNotice
from evaluator.errors import ClientError, SMDebugValueError
from evaluator.formats.collections_file import CollectionsFile
from evaluator.formats.keys import END_OF_JOB_KEY, index_key
from evaluator.formats.tensorboard.frames import (
    Frames,
    claimed_size,
    frame_records,
    next_record,
    simple_scalars,
)
from evaluator.formats.tensorboard.summary import is_event_file, parse_event, phase_of_folder
from evaluator.formats.tfrecord import HEADER_SIZE, RECORD_OVERHEAD
from evaluator.modes import ModeKeys
from evaluator.sources.tensorboard.layout import (
    TagCollections,
    TensorBoardMapping,
    choose_run,
    find_runs,
)
from evaluator.sources.tensorboard.steps import (
    MAX_STEP,
    Folder,
    apply_event,
    apply_scalars,
    distinct,
)
from evaluator.sources.tensorboard.values import HeldTensors, held_steps
from evaluator.storage.base import ObjectInfo, Storage
from evaluator.storage.schemes import is_remote, local_path

if TYPE_CHECKING:
    from evaluator.engine.cache import TrialCache
    from evaluator.engine.problems import DataProblems, Problem
    from evaluator.engine.runner import BackgroundLoop
    from evaluator.engine.view import TrialView

__all__ = ["TensorBoardSource"]

log = structlog.get_logger("evaluator.trial")

WORKER = "worker_0"
_CHUNK_RECORDS = 1 << 16  # records framed and decoded at once (bounds the arrays' memory)
_READ_BYTES = 32 << 20  # read of a file at once (a longer record is read whole, as listed)
_RESYNC_BYTES = 8 << 20  # looked through for the next valid record after a wrong length
# A local log whose event files were all last written this long before it is opened is a
# finished run: complete at once (docs/tensorboard.md, "Live logs").
UNCHANGED_SECONDS = 60.0


_WHAT_IS_LOST = {
    "corrupt": "(that record)",
    "unreadable": "(that record)",
    "truncated": "(the file's last record)",
    "step_too_large": "(the records at those steps)",
}


@dataclass
class _File:
    folder: str
    offset: int = 0  # bytes consumed: every record before it is whole and parsed
    seen: int = 0  # the size listed when the file was last read
    broken: bool = False
    suspect: str | None = None  # why the record at ``offset`` failed its CRC (a live tail)


class TensorBoardSource(SourceBase):
    """Reads one TensorBoard run through a ``Storage`` and serves it as smdebug-style steps."""

    kind = "tensorboard"
    storage: Storage

    def __init__(self, storage: Storage, *, options: TrialOptions | None = None) -> None:
        self.storage = storage
        self.options = options or TrialOptions()
        self.mapping: TensorBoardMapping | None = None
        self.held = HeldTensors(lambda: self.mapping is not None and self.mapping.phases)
        self._files: dict[str, _File] = {}
        self._folders: dict[str, Folder] = {}
        self._tags = TagCollections(None)
        self._ignored: set[str] = set()  # folders of other runs
        self._known: dict[ModeKeys, np.ndarray] = {}  # mode steps handed on, sorted
        self._scans = 0  # scans that brought news
        self._last_step = -1
        self._unchanged = False  # a local log nothing wrote to for a while when opened
        self._problems: DataProblems | None = None  # the trial's, once its values are opened
        self._corrupt: list[dict[str, Any]] = []  # corrupt records met before that
        self._ended = False  # the run has ended (end marker, or a local log left unchanged)
        self._torn: set[str] = set()  # files whose lost last record was told
        self._prefix = f"{storage.uri.rstrip('/')}/"  # a file's name in data problems

    async def aclose(self) -> None:
        self.held.close()
        self._folders = {}
        await self.storage.aclose()

    async def training_ended(self) -> bool:
        """The end marker, or a local log that nothing had written to for ``UNCHANGED_SECONDS``
        when it was opened (a finished run: complete at once, not after idle scans)."""
        if not self._ended:
            self._ended = self._unchanged or await self.storage.exists(END_OF_JOB_KEY)
        return self._ended

    def _unchanged_since_opened(self, files: list[ObjectInfo]) -> bool:
        """Whether every event file of a local log was last written ``UNCHANGED_SECONDS``
        ago or more (S3 listings are not asked: there a run ends after idle scans)."""
        if is_remote(self.storage.uri) or not files:
            return False
        root = local_path(self.storage.uri)
        try:
            newest = max(os.stat(os.path.join(root, o.key)).st_mtime for o in files)
        except OSError:
            return False
        return time.time() - newest >= UNCHANGED_SECONDS

    def open_values(self, cache: TrialCache, view: TrialView, loop: BackgroundLoop) -> HeldTensors:
        self._problems = cache.problems
        cache.at_idle_end.append(self._idle_end)
        for found in self._corrupt:  # met before the values were opened
            self._problems.note(**found)
        return self.held.open(view)

    def writer_step(self, global_step: int) -> tuple[ModeKeys, int] | None:
        """The step the writer logged for ``global_step``, and its mode (``Trial.writer_step``);
        None when they are the same (a run without phases)."""
        return self.held.to_writer(global_step)

    def describe(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": "TensorBoard log (events.out.tfevents.* files)"}
        if self.mapping is not None:
            found["mapping"] = self.mapping.describe()
        found["end_marker"] = "TensorBoard writes no end marker"
        return found

    # ------------------------------------------------------------------ discovery

    async def _event_files(self) -> list[ObjectInfo]:
        pages = cast(AsyncGenerator[ObjectInfo, None], self.storage.list_after(""))
        async with contextlib.aclosing(pages) as listing:
            return [o async for o in listing if is_event_file(o.key)]

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections:
        """Wait until event files exist, then decide the run and the mapping."""
        deadline = time.monotonic() + timeout
        notice: WaitNotice | None = None
        while True:
            found = await self._event_files()
            if found:
                self._map([o.key for o in found])
                self._unchanged = self._unchanged_since_opened(found)
                manifest = CollectionsFile(dict(self._tags.collections), num_workers=1)
                return LoadedCollections(manifest, {WORKER}, [])
            if await self.training_ended() or time.monotonic() >= deadline:
                raise ClientError(
                    f"no TensorBoard event files (events.out.tfevents.*) under "
                    f"{self.storage.uri} after {timeout:g} s"
                )
            notice = notice or WaitNotice(
                "TensorBoard event files", self.storage.uri, interval=wait_log_interval
            )
            notice.tick()
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))

    async def preview(self) -> dict[str, Any]:
        """``describe()`` as opening would map the log now, without waiting for event files;
        raises ClientError as opening would (several runs and none chosen)."""
        found = await self._event_files()
        if found:
            self._map([o.key for o in found])
        return self.describe()

    def _map(self, keys: list[str]) -> None:
        runs = find_runs(keys)
        run = choose_run(runs, self.options.tensorboard_run, self.storage.uri)
        names = sorted(runs)
        members = runs[run]
        phases = any(m is not None for m in members.values())
        for folder, phase in members.items():
            mode = phase if phase is not None else (ModeKeys.TRAIN if phases else ModeKeys.GLOBAL)
            self._folders[folder] = Folder(mode)
        options = self.options
        self._tags = TagCollections(
            options.tensorboard_collections, tag_phases=options.tensorboard_tag_phases
        )
        self.mapping = TensorBoardMapping(
            run=run,
            runs=names,
            folders={f: self._folders[f].mode.name for f in members},
            phases=phases,
            collections=self._tags.specs,
            tag_phases=None if options.tensorboard_tag_phases is False else self._tags.tag_phases,
        )

    def _adopt(self, folder: str) -> bool:
        """Whether a folder that appeared after the mapping was made belongs to the run (a
        phase folder created on first use, such as Keras' ``validation/``); it is added."""
        mapping = self.mapping
        if folder in self._ignored or mapping is None:
            return False
        phase = phase_of_folder(posixpath.basename(folder)) if folder else None
        if phase is None or posixpath.dirname(folder) != mapping.run:
            self._ignored.add(folder)
            return False
        if not mapping.phases:
            log.warning(
                "tensorboard_folder_ignored",
                folder=folder,
                reason="the run had no train/validation folder when the trial was opened, so "
                "its steps are global steps; reopen the trial to read this folder",
            )
            self._ignored.add(folder)
            return False
        self._folders[folder] = Folder(phase)
        mapping.folders[folder] = phase.name
        return True

    # ------------------------------------------------------------------ scans

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        """Read what every event file of the run gained since the last scan, and hand on
        the steps it brought. The end marker is looked up when ``with_end_marker``."""
        listed = await self._event_files()
        grown: list[tuple[ObjectInfo, _File]] = []
        for obj in sorted(listed, key=lambda o: (posixpath.dirname(o.key), o.key)):
            folder = posixpath.dirname(obj.key)
            if folder not in self._folders and not self._adopt(folder):
                continue  # another run's
            state = self._files.get(obj.key)
            if state is None:
                state = self._files[obj.key] = _File(folder)
            if not state.broken and obj.size > max(state.offset, state.seen):
                grown.append((obj, state))  # bytes beyond a torn record are read once more
                state.seen = obj.size
        firsts = await asyncio.gather(*(self._read_part(o, s, _READ_BYTES) for o, s in grown))
        for (obj, state), blob in zip(grown, firsts, strict=True):
            await self._read_file(obj, state, blob)  # in order: a folder's files are a sequence
        ended = await self.training_ended() if with_end_marker else self._ended
        if ended:
            self._torn_tails()
        files = self._hand_on(range_steps)
        last = index_key(self._last_step, WORKER) if self._last_step >= 0 else None
        return IndexScan(files, last, end_marker=ended and with_end_marker)

    async def _read_part(self, obj: ObjectInfo, state: _File, size: int) -> bytes:
        """At most ``size`` bytes of the file from where its reading stopped (never more than
        the listing says it has: a sparse file listed as 40 GiB is read a part at a time)."""
        return await self.storage.read_range(
            obj.key, state.offset, min(obj.size, state.offset + size)
        )

    async def _read_file(self, obj: ObjectInfo, state: _File, blob: bytes) -> None:
        """Consume ``blob`` (the file's first part), then the rest of what the listing says
        the file has, a part at a time; a record longer than a part is read whole when the
        file is long enough to hold it (else it is a torn record: come back later)."""
        asked = min(obj.size - state.offset, _READ_BYTES)
        while True:
            start = state.offset
            with gc_paused():  # many small containers, no cycles (as loading index files)
                self._consume(obj.key, state, blob)
            if state.broken or (state.suspect is not None and state.offset == start):
                return  # stopped at a corrupt record, or at a live tail that may be unflushed
            if start + len(blob) >= obj.size or len(blob) < asked:
                return  # the end, or fewer bytes than listed: on when the listing grows
            want = _READ_BYTES
            if state.offset == start:  # one record longer than the part read
                claimed = claimed_size(blob, 0)
                if claimed is None or start + claimed > obj.size:
                    return
                want = claimed
            asked = min(obj.size - state.offset, want)
            blob = await self._read_part(obj, state, want)

    def _consume(self, key: str, state: _File, blob: bytes) -> None:
        """Apply the records of ``blob`` (bytes from ``state.offset`` on) to the folder's
        columns; a record cut short is left for the next read. One-scalar events are read
        all at once (``simple_scalars``); the others are decoded one by one, in order with
        them where order matters (a purge, an old file's rule). A record whose length points
        past the file's end, or whose CRC is wrong, while a valid record follows is a data
        problem, and reading goes on from that record (``_resynchronise``,
        ``_skip_corrupt``)."""
        folder = self._folders[state.folder]
        where = self._prefix + key
        buf = np.frombuffer(blob, np.uint8)
        pos = 0
        state.suspect = None  # looked at again: a tail that became whole is no longer suspect
        while True:
            frames = frame_records(
                blob, source=where, start=pos, limit=_CHUNK_RECORDS, at=state.offset
            )
            self._apply_records(folder, blob, buf, frames, where, state.offset)
            pos = frames.end
            if frames.corrupt is not None:
                skip = self._skip_corrupt(blob, pos, state, frames.corrupt)
                if skip is None:
                    break  # a live file's tail: read again when it grows
                self._data_problem(where, folder, skip[1], state.offset + pos)
                if state.broken:
                    break
                pos = skip[0]
                continue
            if len(frames.starts) == _CHUNK_RECORDS:
                continue
            if pos >= len(blob):
                break
            found = self._resynchronise(blob, pos, state)
            if found is None:
                break  # a record cut short: read again from there next time
            self._data_problem(where, folder, found[1], state.offset + pos)
            pos = found[0]
        state.offset += pos

    def _skip_corrupt(
        self, blob: bytes, pos: int, state: _File, reason: str
    ) -> tuple[int, str] | None:
        """(where reading goes on, what was wrong) for the record at ``pos`` whose CRC is
        wrong (``reason``). A valid record after it, within ``_RESYNC_BYTES``, shows it was
        written whole: it is skipped. None follows in ``blob`` while the file holds more: None,
        and the file is read on from ``pos`` (a part that starts there). None follows at all:
        in a finished run the file is not read past it (``state.broken``); in a live one its
        bytes may not all be flushed yet, so nothing is skipped and None says to read it again
        when the file grows (if the run ends first, ``_torn_tails`` tells ``reason``)."""
        found = next_record(blob, pos + 1, window=_RESYNC_BYTES)
        if found is not None:
            detail = (
                f"{reason}; bytes {state.offset + pos} to {state.offset + found} skipped, "
                "reading resumed at the next valid record"
            )
            return found, detail
        if pos > 0 and state.offset + len(blob) < state.seen:
            return None  # the part read ends inside the window: read on from it
        if not (self._ended or self._unchanged):
            state.suspect = reason
            return None
        state.broken = True
        return pos, f"{reason}; no valid record follows it, the file is not read past it"

    def _resynchronise(self, blob: bytes, pos: int, state: _File) -> tuple[int, str] | None:
        """(where reading goes on, what was wrong) when the record at ``pos`` claims a length
        past the file's listed end yet a valid record follows it: its length field is wrong,
        not a record being written. None when no valid record follows (a torn last record)."""
        claimed = claimed_size(blob, pos)
        if claimed is None or state.offset + pos + claimed <= state.seen:
            return None
        found = next_record(blob, pos + 1, window=_RESYNC_BYTES)
        if found is None:
            return None
        detail = (
            f"corrupt record at byte offset {state.offset + pos}: its length field claims "
            f"{claimed - RECORD_OVERHEAD} bytes, past the file's end at {state.seen}; reading "
            f"resumed at the next valid record, at byte offset {state.offset + found}"
        )
        return found, detail

    def _idle_end(self) -> None:
        """Idle scans ended the run (TensorBoard writes no end marker): what a file left
        unread is told, as when an end marker is seen."""
        self._ended = True
        self._torn_tails()

    def _torn_tails(self) -> None:
        """Once the run has ended, a file that still ends inside a record lost that record:
        a data problem of the trial (``truncated``), never a quiet end."""
        for key, state in self._files.items():
            if state.broken or state.offset >= state.seen or key in self._torn:
                continue
            self._torn.add(key)
            where = self._prefix + key
            folder = self._folders[state.folder]
            if state.suspect is not None:  # a tail that failed its CRC while the run was live
                detail = f"{state.suspect}; the run has ended with no valid record after it"
                self._data_problem(where, folder, detail, state.offset)
                continue
            detail = (
                f"the file ends inside the record at byte offset {state.offset} (it has "
                f"{state.seen} bytes) and the run has ended: that record is lost"
            )
            self._data_problem(where, folder, detail, state.offset, problem="truncated")

    def _data_problem(
        self,
        where: str,
        folder: Folder,
        detail: str,
        offset: int | None,
        problem: Problem = "corrupt",
    ) -> None:
        """A record that cannot be read: a data problem of the trial (the result file's
        ``data_problems``, with the file and the record's offset), never a quiet end."""
        read = [int(a.max()) for a in folder.new_steps if len(a)] + folder.new_step
        state = self._files.get(where.removeprefix(self._prefix))
        broken = state is not None and state.broken
        found: dict[str, Any] = {
            "file": where,
            "step": max(read, default=folder.recent_step),  # the writer's, last read before it
            "worker": WORKER,
            "problem": problem,
            "tensor": _WHAT_IS_LOST[problem]
            if not broken
            else "(every record after it in this file)",
            "mode": folder.mode.name,
            "detail": detail,
            "trial_complete": self._ended,
            "size": state.seen if state is not None else 0,
            "offset": offset,
        }
        if self._problems is not None:
            self._problems.note(**found)
        else:
            self._corrupt.append(found)

    def _apply_records(
        self, folder: Folder, blob: bytes, buf: np.ndarray, frames: Frames, where: str, at: int
    ) -> None:
        """Apply the records ``frames`` found in ``blob`` (which starts at byte ``at`` of the
        file); a record that is not a valid Event, or holds more than the bounds allow, is a
        data problem and is skipped."""
        starts, lengths = frames.starts, frames.lengths
        count = len(starts)
        fast = simple_scalars(buf, starts, lengths)
        base = folder.order
        flushed = 0  # one-scalar records before it are applied
        tags = self._tags
        for i in np.flatnonzero(~fast.ok).tolist():
            first = int(starts[i])
            payload = blob[first : first + int(lengths[i])]
            try:
                event = parse_event(payload, folder.plugin_of, source=where)
            except SMDebugValueError as e:
                offset = at + first - HEADER_SIZE
                detail = f"the record at byte offset {offset} cannot be read: {e}; skipped"
                self._data_problem(where, folder, detail, offset, problem="unreadable")
                continue
            if event.what in ("start", "file_version") or not folder.ordered_by_step:
                apply_scalars(folder, fast, flushed, i, base, tags)  # the order matters
                flushed = i
            apply_event(folder, event, base + i, tags)
        apply_scalars(folder, fast, flushed, count, base, tags)
        folder.order = base + count
        if folder.refused:
            detail = (
                f"{len(folder.refused)} record(s) at steps past {MAX_STEP} (2**62 - 1), the "
                f"largest whose global step fits in 64 bits, first {folder.refused[0]}; left out"
            )
            self._data_problem(where, folder, detail, None, problem="step_too_large")
            folder.refused = []

    def _hand_on(self, range_steps: tuple[int | None, int | None] | None) -> list[ParsedIndex]:
        """Publish the columns that changed, and hand the trial the new steps of every mode
        (one ``StepBatch``; none when nothing changed)."""
        tags = self._tags
        tags.publish()  # the collections gain the tags filed since the last hand-on
        if not tags.decided and any(f.changed for f in self._folders.values()):
            self._decide_tag_phases()
        places = self._places() if tags.uses_tag_phases and tags.tag_phases else None
        changed: set[tuple[ModeKeys, str]] = set()
        news: dict[ModeKeys, list[np.ndarray]] = {}
        names: dict[ModeKeys, set[str]] = {}
        for key, folder in self._folders.items():
            if not folder.changed:
                continue
            if places is None:  # a folder is one mode, a tag one tensor
                mode = folder.mode
                changed.update((mode, tag) for tag in folder.changed)
                names.setdefault(mode, set()).update(folder.changed)
                news.setdefault(mode, []).append(folder.take_new_steps())
            else:  # phase words: a tensor's steps are its own tags' (``_places``)
                folder.take_new_steps()
                for tag in folder.changed:
                    at = places[(key, tag)]
                    changed.add(at)
                    names.setdefault(at[0], set()).add(at[1])
                    news.setdefault(at[0], []).append(folder.series[tag].snapshot().steps)
            folder.changed = set()
        if not changed:
            return []
        snapshots = dict(self.held.snapshots)
        for mode, tag in changed:
            keep = self._keeper(mode, range_steps)
            if places is None:
                held = [
                    f.series[tag]
                    for f in self._folders.values()
                    if f.mode == mode and tag in f.series
                ]
            else:
                held = [
                    self._folders[k].series[t] for (k, t), at in places.items() if at == (mode, tag)
                ]
            snapshots[(mode, tag)] = tuple(series.snapshot(keep) for series in held)
        steps = []
        for mode, parts in news.items():
            new = distinct(parts)
            g = self.held.to_global(mode, new)
            if range_steps is not None:
                keep = self._keeper(mode, range_steps)
                assert keep is not None
                inside = keep(new)
                new, g = new[inside], g[inside]
            known = self._known.get(mode)
            if known is not None and len(known) and len(new) and new[0] > known[-1]:
                self._known[mode] = np.concatenate([known, new])  # only later steps
            elif known is not None:
                fresh = ~np.isin(new, known)
                new, g = new[fresh], g[fresh]
                self._known[mode] = np.union1d(known, new)
            else:
                self._known[mode] = new
            if len(new):
                steps.append((mode, new.tolist(), g.tolist()))
                self._last_step = max(self._last_step, int(g[-1]))
        steps.sort(key=lambda s: s[2][0])
        self._scans += 1
        key = index_key(max(self._last_step, 0), WORKER) + f"#{self._scans}"
        news_of_scan = held_steps(steps, names, snapshots, self.held)
        return [ParsedIndex(key, max(self._last_step, 0), WORKER, news_of_scan)]

    def _decide_tag_phases(self) -> None:
        """Before the first step is handed on: tags with phase words (``train/loss``,
        ``eval/loss``) give the run TRAIN and EVAL steps, as phase folders do; the mapping
        they make is logged (``tensorboard_mapping``)."""
        mapping = self.mapping
        if not self._tags.decide() or mapping is None:
            return
        if not mapping.phases:
            mapping.phases = True
            for key, folder in self._folders.items():
                if folder.mode == ModeKeys.GLOBAL:
                    folder.mode = ModeKeys.TRAIN
                    mapping.folders[key] = folder.mode.name
        # evaluation_started showed the mapping made from the file names alone
        log.info("tensorboard_mapping", trial=self.storage.uri, mapping=mapping.describe())

    def _places(self) -> dict[tuple[str, str], tuple[ModeKeys, str]]:
        """Where phase words are used: (folder, tag) -> (mode, tensor name) of every tag held.
        A tag's phase word gives its mode in the run's own folder; a phase folder's mode
        wins; the tensor is the tag less its phase word (``TagCollections.tensor_name``)."""
        mapping = self.mapping
        run = mapping.run if mapping is not None else None
        found = self._tags.tag_phases
        places: dict[tuple[str, str], tuple[ModeKeys, str]] = {}
        for key, folder in self._folders.items():
            for tag in folder.series:
                word = found.get(tag)
                if word is None:
                    places[(key, tag)] = (folder.mode, tag)
                else:
                    places[(key, tag)] = (word[1] if key == run else folder.mode, word[0])
        return places

    def _keeper(
        self,
        mode: ModeKeys,
        range_steps: tuple[int | None, int | None] | None,
    ) -> Callable[[np.ndarray], np.ndarray] | None:
        """Which mode steps of ``mode`` the trial's step range keeps (None: all)."""
        if range_steps is None:
            return None
        begin, end = range_steps
        held = self.held

        def keep(steps: np.ndarray) -> np.ndarray:
            g = held.to_global(mode, steps)
            inside = np.ones(len(steps), bool)
            if begin is not None:
                inside &= g >= begin
            if end is not None:
                inside &= g < end
            return inside

        return keep
