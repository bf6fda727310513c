"""The TensorBoard side of a trial: event files read as the same steps, tensors and collections.

``TensorBoardSource`` answers what ``TrialSource`` answers for smdebug output (collections,
scans of new steps, event-file bytes), so one ``Trial`` serves both. Its scans tail every
``events.out.tfevents.*`` file of the run from the offset read last (one ranged read per file
that grew; a torn last record is read again from its start next time), parse the summaries
(``evaluator.formats.tb_summary``), and hand each (mode, step) on as an index file whose
values are held decoded in memory (``ValueStore``, read by ``HeldValueReader``): a scalar or
tensor as its value, a histogram as saved reductions (``min``, ``max``, ``mean``, ``variance``, ``l2``,
``count`` …) and its buckets (the ``histogram`` reduction, ``Tensor.histogram``).

Mapping (docs/tensorboard.md): tags are tensor names; a run is a folder with event files, with
its phase sub-folders (``train``/``training`` -> TRAIN, ``validation``/``val``/``eval``/``test``
-> EVAL, also as the last word: ``loss_train``). With phases, mode steps are the event steps
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
import posixpath
import struct
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, cast

import google_crc32c
import structlog

from evaluator.errors import (
    ClientError,
    CorruptRecordError,
    IncompleteRecord,
    ObjectNotFound,
    SMDebugValueError,
)
from evaluator.formats.collections_file import CollectionsFile
from evaluator.formats.crc import MASK_DELTA as _MASK_DELTA
from evaluator.formats.index_file import IndexColumns, IndexMeta
from evaluator.formats.keys import event_key, index_key
from evaluator.formats.tb_summary import (
    Histogram,
    is_event_file,
    parse_event,
    phase_of_folder,
    simple_scalar,
)
from evaluator.formats.tfrecord import (
    FOOTER_SIZE,
    HEADER,
    HEADER_SIZE,
    KNOWN_LENGTH_CRCS,
    read_record,
)
from evaluator.modes import ModeKeys
from evaluator.storage.base import ObjectInfo, Storage
from evaluator.trial.gcpause import gc_paused
from evaluator.trial.held_values import ValueStore
from evaluator.trial.options import TrialOptions
from evaluator.trial.source import IndexScan, LoadedCollections, ParsedIndex, TrialSource
from evaluator.trial.tb_layout import TagCollections, TensorBoardMapping, choose_run, find_runs
from evaluator.trial.tb_steps import (
    Folder,
    Value,
    apply_event,
    apply_scalar,
    histogram_records,
    in_range,
)
from evaluator.trial.waits import WaitNotice

__all__ = ["TensorBoardSource"]

log = structlog.get_logger("evaluator.trial")

WORKER = "worker_0"
_VALUES_PER_FILE = 100_000
_CHUNK_EVENTS = 50_000  # events parsed before the steps they complete are handed on
_ONES = [1] * 64
_FOOTER = struct.Struct("<I")


@dataclass
class _File:
    folder: str
    offset: int = 0  # bytes consumed: every record before it is whole and parsed
    seen: int = 0  # the size listed when the file was last read
    broken: bool = False


class TensorBoardSource(TrialSource):
    """Reads one TensorBoard run through a ``Storage`` and serves it as smdebug-style steps."""

    kind = "tensorboard"

    def __init__(self, storage: Storage, *, options: TrialOptions | None = None) -> None:
        super().__init__(storage, options=options)
        options = self.options
        self.values = ValueStore(storage.uri)
        self.mapping: TensorBoardMapping | None = None
        self._files: dict[str, _File] = {}
        self._folders: dict[str, Folder] = {}
        self._tags = TagCollections(None)
        self._ignored: set[str] = set()  # folders of other runs
        self._file_key: str | None = None  # the in-memory file values are appended to
        self._file_values = 0
        self._emitted: dict[int, int] = {}  # global step -> times handed on
        self._last_step = -1
        self._tag_names: dict[bytes, str] = {}  # tag bytes -> tag, of the fast path
        self._known_scalars: set[str] = set()  # tags filed as scalars by the fast path

    async def aclose(self) -> None:
        self.values.clear()
        await self.storage.aclose()

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

    async def describe(self) -> str | None:
        """How the log would be mapped now (None without event files); raises ClientError
        as opening would (several runs and none chosen)."""
        found = await self._event_files()
        if not found:
            return None
        self._map([o.key for o in found])
        assert self.mapping is not None
        return self.mapping.describe()

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

    async def scan(
        self,
        start_after: str | None,
        already_read: frozenset[str] | set[str],
        range_steps: tuple[int | None, int | None] | None,
        *,
        with_end_marker: bool,
        apply_chunk: Callable[[list[ParsedIndex], str], None] | None = None,
    ) -> IndexScan:
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
        blobs = await asyncio.gather(
            *(self.storage.read_range(o.key, s.offset, o.size) for o, s in grown)
        )
        with gc_paused():  # many small containers, no cycles (as loading index files)
            for (obj, state), blob in zip(grown, blobs, strict=True):
                self._consume(obj.key, state, blob, range_steps, apply_chunk)
        files = self._hand_on(range_steps)
        end = with_end_marker and await self.training_ended()
        last = index_key(self._last_step, WORKER) if self._last_step >= 0 else None
        return IndexScan(files, last, end_marker=end)

    def _consume(
        self,
        key: str,
        state: _File,
        blob: bytes,
        range_steps: tuple[int | None, int | None] | None = None,
        apply_chunk: Callable[[list[ParsedIndex], str], None] | None = None,
    ) -> None:
        """Parse the records of ``blob`` (bytes from ``state.offset`` on) into the folder's
        pending steps; a record cut short is left for the next scan. With ``apply_chunk``, a
        long file's steps are handed on every ``_CHUNK_EVENTS`` events, all but the folder's
        newest (which may still gain values), so that they are not all held at once."""
        folder = self._folders[state.folder]
        countdown = _CHUNK_EVENTS
        where = f"{self.storage.uri.rstrip('/')}/{key}"
        pos = 0
        size = len(blob)
        tag_names = self._tag_names
        known = self._known_scalars
        unpack_header = HEADER.unpack_from
        unpack_footer = _FOOTER.unpack_from
        crcs = KNOWN_LENGTH_CRCS
        crc32c = google_crc32c.value
        while pos < size:
            # The common record framed inline (its length CRC known, its payload CRC right)
            # and, if it is one simple_value scalar, read off the wire format.
            fast = None
            end = pos + HEADER_SIZE
            if end <= size:
                n, check = unpack_header(blob, pos)
                end += n
                if crcs.get(n) == check and end + FOOTER_SIZE <= size:
                    payload = blob[pos + HEADER_SIZE : end]
                    crc = crc32c(payload)  # masked as TFRecord masks it, inline
                    crc = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
                    if unpack_footer(blob, end)[0] == crc:
                        fast = simple_scalar(payload, tag_names)
            if fast is not None:
                pos = end + FOOTER_SIZE
                step, tag, value = fast
                if tag not in known:
                    known.add(tag)
                    self._tags.add(tag, "scalar")
                apply_scalar(folder, step, tag, value)
            else:
                try:
                    record = read_record(blob, pos, source=where)
                except IncompleteRecord:
                    break  # a writer is appending: read again from here next time
                except CorruptRecordError as e:
                    log.warning("tensorboard_record_corrupt", file=where, detail=str(e))
                    state.broken = True  # as TensorBoard: nothing after a corrupt record
                    break
                try:
                    event = parse_event(record.payload, folder.plugin_of, source=where)
                except SMDebugValueError as e:
                    log.warning("tensorboard_record_unreadable", file=where, detail=str(e))
                    pos += record.length
                    continue
                pos += record.length
                apply_event(folder, event, self._tags)
            countdown -= 1
            if countdown <= 0 and apply_chunk is not None:
                countdown = _CHUNK_EVENTS
                files = self._hand_on(range_steps, all_steps=False)
                if files:
                    apply_chunk(files, files[-1].key)
        state.offset += pos

    def _hand_on(
        self, range_steps: tuple[int | None, int | None] | None, *, all_steps: bool = True
    ) -> list[ParsedIndex]:
        """Turn every folder's pending steps (all, or all but its newest) into index files,
        in global-step order."""
        tags = self._tags
        if not tags.decided and any(f.pending for f in self._folders.values()):
            self._decide_tag_phases()
        mapping = self.mapping
        phases = mapping is not None and mapping.phases
        run = mapping.run if mapping is not None else None
        # Phase words split a step's values by mode; without any, a step is one part.
        split = tags.split if tags.uses_tag_phases and tags.tag_phases else None
        by_step: dict[tuple[int, ModeKeys, int], dict[str, Value]] = {}
        for key, folder in self._folders.items():
            mode = folder.mode
            pending = folder.pending
            if not all_steps and pending:
                newest = max(pending)
                folder.pending = {newest: pending.pop(newest)}
            for step, data in pending.items():
                parts = split(data, mode, key == run) if split else ((mode, data),)
                for at_mode, part in parts:
                    g = 2 * step + (1 if at_mode == ModeKeys.EVAL else 0) if phases else step
                    if range_steps is not None and not in_range(g, range_steps):
                        continue
                    by_step.setdefault((g, at_mode, step), {}).update(part)
            if all_steps:
                folder.pending = {}
        out = []
        for (g, mode, step), data in sorted(by_step.items(), key=lambda kv: kv[0][0]):
            out.append(self._index_file(g, mode, step, data))
            self._last_step = max(self._last_step, g)
        return out

    def _decide_tag_phases(self) -> None:
        """Before the first step is handed on: tags with phase words (``train/loss``,
        ``eval/loss``) give the run TRAIN and EVAL steps, as phase folders do."""
        mapping = self.mapping
        if not self._tags.decide() or mapping is None or mapping.phases:
            return
        mapping.phases = True
        for key, folder in self._folders.items():
            if folder.mode == ModeKeys.GLOBAL:
                folder.mode = ModeKeys.TRAIN
                mapping.folders[key] = folder.mode.name

    def _index_file(self, g: int, mode: ModeKeys, step: int, data: dict[str, Value]) -> ParsedIndex:
        names: list[str] = []
        values: list[Any] = []
        for tag, value in data.items():
            if isinstance(value, Histogram):
                for name, held in histogram_records(tag, value):
                    names.append(name)
                    values.append(held)
            else:
                names.append(tag)
                values.append(value)  # a numpy scalar, or an array
        # Values go into in-memory files of many steps each.
        if self._file_key is None or self._file_values > _VALUES_PER_FILE:
            self._file_key, self._file_values = event_key(g, WORKER), 0
        key = self._file_key
        base = self.values.append(key, values)
        count = len(values)
        self._file_values = base + count
        starts = list(range(base, base + count))
        lengths = _ONES[:count] if count <= len(_ONES) else [1] * count
        index = IndexColumns(IndexMeta(mode, step, key), names, starts, lengths, ())
        times = self._emitted.get(g, 0)
        self._emitted[g] = times + 1
        ikey = index_key(g, WORKER) + (f"#{times}" if times else "")
        return ParsedIndex(ikey, g, WORKER, index)

    # ------------------------------------------------------------------ values

    async def read_optional(self, key: str) -> bytes | None:
        try:
            return await self.storage.read(key)
        except ObjectNotFound:
            return None
