"""A hostile smdebug trial (issue 40): an index file giving a record an 8 GiB length in a
sparse 40 GiB event file is a CorruptRecordError naming the file and offset, found from the
record's 12-byte header before anything large is read (before: 16.8 GB resident, 71 s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluator.errors import CorruptRecordError
from evaluator.formats import Collection
from evaluator.sources.smdebug.held_files import CHECKED_ABOVE
from evaluator.storage.local import LocalStorage
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial


def test_an_index_length_past_the_records_own_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    for step in range(3):
        writer.write_step(step, {"loss": np.float32(step)})
    writer.end_training()
    (index,) = tmp_path.glob("index/*/000000000001_worker_0.json")
    entry = json.loads(index.read_text())
    entry["tensor_payload"][0]["length"] = 1 << 33
    index.write_text(json.dumps(entry))
    (event,) = tmp_path.glob("events/000000000001/*.tfevents")
    os.truncate(event, 40 << 30)  # sparse: the 8 GiB the index claims are there, as zeros

    asked: list[int] = []
    for name in ("read_range", "read_range_sync"):
        original = getattr(LocalStorage, name)

        def bounded(self: LocalStorage, key: str, start: int, end: int, _f=original) -> object:
            asked.append(end - start)
            assert end - start <= CHECKED_ABOVE, f"asked for {end - start} bytes at once"
            return _f(self, key, start, end)

        monkeypatch.setattr(LocalStorage, name, bounded)
    with create_trial(str(tmp_path)) as trial:
        assert trial.tensor("loss").value(2).tolist() == [2.0]
        with pytest.raises(CorruptRecordError, match=r"000000000001_worker_0\.tfevents at byte"):
            trial.tensor("loss").value(1)
    assert asked and max(asked) <= CHECKED_ABOVE
