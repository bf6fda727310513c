"""Index and collections files over the trial options' limits are refused as bad data, the
errors naming the file and the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluator.errors import IndexReaderException, SMDebugValueError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial


def test_an_index_file_with_too_many_entries_is_refused(engine: Any) -> None:
    """A step's index file listing more entries than max_index_entries fails the scan, naming
    the file and the limit."""
    e = engine(max_index_entries=2)  # every step saves three tensors
    e.write(0)
    with pytest.raises(
        IndexReaderException,
        match=r"index/000000000/000000000000_worker_0\.json "
        r"lists 3 entries, over the limit of 2 \(max_index_entries\)",
    ):
        e.poll()


def test_an_index_file_too_large_in_the_listing_is_refused_unread(engine: Any) -> None:
    """An index file the listing shows larger than max_index_file_mb is refused before it is
    read."""
    e = engine(max_index_file_mb=100 / 1024 / 1024)
    e.write(0)
    e.storage.calls.clear()
    with pytest.raises(
        IndexReaderException,
        match=r"000000000000_worker_0\.json is \d+ bytes, "
        r"over the limit of 100 \(max_index_file_mb\)",
    ):
        e.poll()
    assert e.storage.calls["read"] == 0


def test_within_the_limits_a_trial_reads_as_before(engine: Any) -> None:
    """At the limits exactly, nothing is refused."""
    e = engine(max_index_entries=3)
    e.write(0, 1)
    assert e.poll()
    assert e.state.all_steps(ModeKeys.GLOBAL) == [0, 1]


def test_a_collections_file_too_large_is_refused(tmp_path: Path) -> None:
    """A collections file over max_collections_file_mb fails opening the trial, naming it."""
    TrialWriter(tmp_path).write_collections([Collection("all", include_regex=[".*"])])
    with pytest.raises(
        SMDebugValueError,
        match=r"worker_0_collections\.json is \d+ bytes, over "
        r"the limit of 10 \(max_collections_file_mb\)",
    ):
        create_trial(str(tmp_path), max_collections_file_mb=10 / 1024 / 1024)


def test_an_over_long_include_regex_is_refused_naming_file_and_collection(tmp_path: Path) -> None:
    """A collection's include_regex longer than max_regex_length fails opening the trial, the
    error naming the collections file, the collection and the limit."""
    TrialWriter(tmp_path).write_collections([Collection("weights", include_regex=["^w" * 10])])
    with pytest.raises(
        SMDebugValueError,
        match=r"collections/000000000/worker_0_collections\.json"
        r": include_regex of collection 'weights' is 20 characters long, over the "
        r"limit of 8 \(max_regex_length\)",
    ):
        create_trial(str(tmp_path), max_regex_length=8)
