"""The trial engine's parts (state, cache, source, poller, reader) wired over in-memory storage.

``engine(**options)`` builds them as ``Trial`` does, on a private background loop, for a trial
that ``Engine.write`` grows step by step: files are written by ``TrialWriter`` into a scratch
folder and copied into a ``MemoryStorage``, so tests can also hide, tear or delay any of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.engine.cache import TrialCache
from evaluator.engine.options import TrialOptions
from evaluator.engine.poller import Poller
from evaluator.engine.runner import BackgroundLoop
from evaluator.engine.view import TrialView
from evaluator.formats import Collection
from evaluator.formats.keys import event_key
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.source import SmdebugSource
from evaluator.sources.smdebug.state import IndexedState
from evaluator.sources.smdebug.values import FileValues
from evaluator.storage import MemoryStorage
from evaluator.testing import TrialWriter
from tests.support import waits

NAMES = ("a", "b", "c")


def value_of(name: str, step: int) -> np.ndarray:
    """What ``Engine.write`` saves for ``name`` at ``step``: distinct for every pair."""
    return np.arange(8, dtype=np.float32) + 100 * step + NAMES.index(name)


class Engine:
    """One trial's engine over a ``MemoryStorage`` that the test fills."""

    names = NAMES
    value_of = staticmethod(value_of)

    def __init__(self, root: Path, loop: BackgroundLoop, **options: Any) -> None:
        self.root = root
        self.loop = loop
        self.options = TrialOptions(**options)
        self.storage = MemoryStorage(uri="memory://job")
        self.synced: set[str] = set()
        self.writer = TrialWriter(root)
        self.writer.write_collections([Collection("all", include_regex=[".*"])])
        self.sync()
        self.state = IndexedState(num_workers=1, workers={"worker_0"})
        self.cache = TrialCache(self.state, self.options, uri=self.storage.uri)
        self.source = SmdebugSource(self.storage, options=self.options)
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[int], None] = lambda count: None
        self.poller = Poller(self.cache, self.source, self.options, None, sleep=self._sleep)
        self.view = self.view_with(lambda name: None)
        assert isinstance(self.view.values, FileValues)
        self.reader = self.view.values.reader

    def view_with(self, refresh: Callable[[str], None]) -> TrialView:
        """A view of the engine's trial whose access-triggered refresh is ``refresh``, with
        the values the source opens over it (as ``Trial`` makes its view)."""
        view = TrialView(self.state, self.cache.lock, refresh)
        view.values = self.source.open_values(self.cache, view, self.loop)
        return view

    async def _sleep(self, seconds: float) -> None:
        """The poller's waits: recorded, then a real sleep capped at 10 ms."""
        self.sleeps.append(seconds)
        self.on_sleep(len(self.sleeps))
        await asyncio.sleep(min(seconds, 0.01))

    def write(self, *steps: int, sync: bool = True) -> None:
        """Save every name of ``NAMES`` at each step (TRAIN mode), then copy to storage."""
        for step in steps:
            self.writer.write_step(step, {n: value_of(n, step) for n in NAMES}, mode=ModeKeys.TRAIN)
        if sync:
            self.sync()

    def end(self) -> None:
        self.writer.end_training()
        self.sync()

    def sync(self, *, skip: Callable[[str], bool] = lambda key: False) -> None:
        """Copy every file of the scratch folder not in storage yet (except ``skip``ped keys)."""
        for path in sorted(self.root.rglob("*")):
            key = path.relative_to(self.root).as_posix()
            if path.is_file() and key not in self.synced and not skip(key):
                self.storage.put(key, path.read_bytes())
                self.synced.add(key)

    def poll(self) -> bool:
        """One on-demand poll, as ``Trial.refresh_data`` runs it."""
        return bool(self.loop.run(self.poller.poll_once()))

    def event_bytes(self, step: int) -> bytes:
        """The event file of ``step`` as written (whatever storage holds)."""
        return (self.root / event_key(step, "worker_0")).read_bytes()


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    """A background loop of the test's own, closed (its pollers cancelled) afterwards."""
    background = BackgroundLoop(name="test-trial-io")
    yield background
    background.close()


@pytest.fixture
def wait_until() -> Callable[..., bool]:
    """``wait_until(condition, timeout=5)``: poll ``condition`` every 2 ms; False on timeout."""

    def wait(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
        return waits.wait_until(condition, timeout=timeout, interval=0.002)

    return wait


@pytest.fixture
def engine(tmp_path: Path, loop: BackgroundLoop) -> Callable[..., Engine]:
    """``engine(**trial_options)``: a fresh engine over an empty in-memory trial."""
    return lambda **options: Engine(tmp_path / "job", loop, **options)
