"""The trial cache over in-memory storage: applying scans, and bounded event-file bytes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from evaluator.engine.lru import shared_bytes
from evaluator.formats.index_file import parse_index_file
from evaluator.formats.keys import index_key
from evaluator.modes import ModeKeys
from evaluator.sources.smdebug.source import ParsedIndex
from evaluator.trial.tensor import Tensor

GLOBAL = ModeKeys.GLOBAL
MiB = 1024 * 1024
# Room for two event files of the engine's trial (about 490 bytes each as counted), not three.
# An odd size, so that no other trial of the test process shares this budget.
TWO_FILES = 1201


def parsed(e: Any, step: int) -> ParsedIndex:
    key = index_key(step, "worker_0")
    return ParsedIndex(key, step, "worker_0", parse_index_file((e.root / key).read_bytes()))


def test_apply_reports_news_once(engine: Any) -> None:
    """A scan's files are applied once: the same file from a concurrent scan is no news."""
    e = engine()
    e.write(0, 1)
    assert e.cache.apply([parsed(e, 0), parsed(e, 1)], index_key(1, "worker_0"), ended=False)
    assert not e.cache.apply([parsed(e, 1)], index_key(1, "worker_0"), ended=False)
    assert e.state.all_steps(GLOBAL) == [0, 1]
    assert not e.state.loaded_all_steps


def test_apply_with_the_end_seen_completes_every_step(engine: Any) -> None:
    """A scan that began after the end marker was seen declares every step complete."""
    e = engine()
    e.write(0, 1)
    e.cache.apply([parsed(e, 0), parsed(e, 1)], index_key(1, "worker_0"), ended=True)
    assert e.state.loaded_all_steps and e.state.last_complete_step == 1


def test_event_file_bytes_stay_within_their_bound_least_recently_used_first(engine: Any) -> None:
    """With room for two event files, the file read longest ago is the one read again from
    storage; the bytes kept never exceed the bound."""
    e = engine(prefetch_steps=0, raw_cache_mb=TWO_FILES / MiB)
    e.write(0, 1, 2)
    e.poll()

    def reads(name: str, step: int) -> int:
        before = e.storage.calls["read_range"]
        t = Tensor(name, SimpleNamespace(name="job"), view=e.view)  # type: ignore[arg-type]
        assert (t.value(step) == e.value_of(name, step)).all()
        return int(e.storage.calls["read_range"] - before)

    # Every tensor of each step (a rule reading only some would fetch only their records).
    assert [sum(reads(n, s) for n in e.names) for s in (0, 1, 2)] == [1, 1, 1]
    assert shared_bytes(TWO_FILES).current_bytes <= TWO_FILES
    assert [reads("b", 2), reads("b", 1), reads("b", 0)] == [0, 0, 1]  # 0 was evicted by 2
    # b at 2 and at 1 came from the two files decoded last (the reader keeps the one before
    # the file at hand: a rule reading the step before too), not from the byte cache: 1, the
    # file of the two it used longest ago, made room for 0; 2 then made room for 1.
    assert [reads("c", 1), reads("c", 2)] == [1, 1]
