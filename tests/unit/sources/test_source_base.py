"""``SourceBase``, the ``Source`` protocol's shared defaults: the trial state of its
``state_type``, scans handed to ``scan_new``, the end marker and optional reads through the
storage, and ``preview`` as ``describe``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evaluator.engine.source import IndexScan, LoadedCollections, ValueStore
from evaluator.engine.state import TrialState
from evaluator.formats.keys import END_OF_JOB_KEY
from evaluator.sources import SourceBase, StepRange
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.state import IndexedState
from evaluator.storage import MemoryStorage


class _Scans(SourceBase):
    """The least a subclass writes, recording what its scans were asked."""

    kind = "test"

    def __init__(self, storage: MemoryStorage | None) -> None:
        self.storage = storage
        self.asked: list[tuple[StepRange, bool]] = []

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections:
        raise AssertionError("not opened here")

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        self.asked.append((range_steps, with_end_marker))
        return IndexScan([], None, end_marker=with_end_marker)

    def open_values(self, cache: Any, view: Any, loop: Any) -> ValueStore:
        raise AssertionError("not opened here")

    def describe(self) -> dict[str, Any]:
        return {"kind": "a test source"}

    async def aclose(self) -> None:
        pass


def test_scan_hands_the_range_and_the_end_marker_question_to_scan_new() -> None:
    """``scan``'s listing position and chunk callback are smdebug's; ``scan_new`` gets the
    step range and whether to look for the end marker."""
    source = _Scans(MemoryStorage())
    found = asyncio.run(source.scan("index/x", {"k"}, (3, 9), with_end_marker=True))
    assert found.end_marker and source.asked == [((3, 9), True)]


def test_make_state_makes_the_state_type() -> None:
    """A ``TrialState`` by default; smdebug's source makes its ``IndexedState``."""
    kw: dict[str, Any] = {"num_workers": 2, "workers": {"a"}, "incomplete_step_window": 7}
    state = _Scans(None).make_state(**kw, range_steps=(1, None))
    assert type(state) is TrialState and state.window == 7 and state.range_steps == (1, None)
    smdebug = SmdebugSource(MemoryStorage()).make_state(**kw, range_steps=None)
    assert type(smdebug) is IndexedState and smdebug.num_workers == 2


def test_end_marker_optional_reads_and_preview_go_through_the_storage() -> None:
    """The end marker and an optional file are the storage's; none without a storage."""
    storage = MemoryStorage()
    source = _Scans(storage)
    assert asyncio.run(source.read_optional("stop")) is None
    assert asyncio.run(source.training_ended()) is False
    storage.put("stop", b"now")
    storage.put(END_OF_JOB_KEY, b"")
    assert asyncio.run(source.read_optional("stop")) == b"now"
    assert asyncio.run(source.training_ended()) is True
    assert asyncio.run(source.preview()) == {"kind": "a test source"}
    bare = _Scans(None)
    assert asyncio.run(bare.read_optional("stop")) is None
    assert asyncio.run(bare.training_ended()) is False


def test_a_source_that_writes_no_scan_says_so() -> None:
    """A subclass with neither ``scan`` nor ``scan_new`` fails its first scan by name."""

    class NoScan(_Scans):
        scan_new = SourceBase.scan_new

    with pytest.raises(NotImplementedError, match="NoScan writes neither scan nor scan_new"):
        asyncio.run(NoScan(None).scan(None, set(), None, with_end_marker=False))
