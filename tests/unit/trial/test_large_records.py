"""Megabyte tensors of a local folder: read alone, read ahead in a thread, reduced on views."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial

SIZE = 300_000  # 1.2 MB of float32: above the size worth reading ahead
STEPS = 4


def expected(name: str, step: int) -> np.ndarray:
    return np.arange(SIZE, dtype=np.float32) * (1 + step) - (100 if name == "g" else 0)


@pytest.fixture()
def large_trial(tmp_path: Path) -> str:
    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("default", include_regex=[".*"])])
    for step in range(STEPS):
        writer.write_step(step, {n: expected(n, step) for n in ("g", "w")}, mode=ModeKeys.TRAIN)
    writer.end_training()
    return str(tmp_path)


# Files of two 1.2 MB records, larger than one coalesced read: each record is read alone.
SMALL = {"raw_cache_mb": 4.0, "max_coalesced_read_mb": 1.0}


@pytest.mark.parametrize("prefetch_steps", [0, 2])
def test_large_records_read_alone_are_private_writable_values(
    large_trial: str, prefetch_steps: int
) -> None:
    """Records too large to be held with their file give every value right, step after step,
    as new writable arrays: a value changed in place does not change the next read."""
    trial = create_trial(large_trial, prefetch_steps=prefetch_steps, **SMALL)
    for _ in range(2):
        for step in range(STEPS):
            for name in ("g", "w"):
                got = trial.tensor(name).value(step)
                np.testing.assert_array_equal(got, expected(name, step))
                assert got.flags.writeable
                got[:] = -1
    # Read twice, yet not kept decoded: a local folder's large record is read again instead.
    assert trial._cache.values.current_bytes == 0
    trial.close()


def test_the_next_steps_large_records_are_read_ahead_in_a_thread(large_trial: str) -> None:
    """Walking the steps in order, the record of the same tensor at the next step is read in a
    second thread, and the reads after the first step take it from there."""
    trial = create_trial(large_trial, **SMALL)
    for step in range(STEPS):
        np.testing.assert_array_equal(trial.tensor("g").value(step), expected("g", step))
    ahead = trial._values.reader._bytes.ahead
    assert ahead is not None and ahead.hits == STEPS - 1
    trial.close()


def test_a_computed_reduction_of_a_large_record_equals_numpy_on_its_value(
    large_trial: str,
) -> None:
    """A reduction the hook did not save is computed from the record's bytes as numpy computes
    it on the value, and the value read afterwards is still a private writable array."""
    trial = create_trial(large_trial, **SMALL)
    g = trial.tensor("g")
    for step in range(STEPS):
        mean = g.reduction_value(step, "mean", abs=True)
        assert mean == np.mean(np.absolute(expected("g", step)))
        assert g.reduction_value(step, "l2") == np.linalg.norm(expected("g", step))
        value = g.value(step)
        assert value.flags.writeable
    trial.close()
