"""Opening a TensorBoard log of N distinct tags costs O(N) (issue 40: 20,000 tags took 22.9 s,
100,000 did not open in 600 s). The work that was quadratic is counted here, not timed:
collection name sets replaced per tag, and one mask over every record per tag (the grouping
of one-scalar records by tag, in ``simple_scalars`` and ``apply_scalars``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats.collections_file import Collection
from evaluator.formats.tensorboard import frames as frames_module
from evaluator.formats.tensorboard.frames import frame_records, simple_scalars
from evaluator.modes import ModeKeys
from evaluator.sources.tensorboard.layout import TagCollections
from evaluator.sources.tensorboard.steps import Folder, apply_scalars
from evaluator.testing.tb_writer import write_scalars
from evaluator.trial import create_trial


class _Counting(np.ndarray):
    """An int64 array that counts the elements its ``==`` comparisons touch."""

    touched = 0

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        _Counting.touched += self.size
        return np.asarray(self) == other


def test_filing_n_tags_replaces_each_collections_names_once_per_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each collection's set is replaced once per ``publish`` (before: once per tag, each a
    copy of every name so far: N**2 / 2 names copied)."""
    replaced: list[int] = []
    setattr_ = object.__setattr__

    def counting(self: Collection, name: str, value: Any) -> None:
        if name == "tensor_names":
            replaced.append(len(value))
        setattr_(self, name, value)

    tags = TagCollections(None)
    monkeypatch.setattr(Collection, "__setattr__", counting)
    for i in range(5000):
        tags.add(f"layer_{i}/loss", "scalar")
    assert replaced == []  # nothing is published before the scan ends
    tags.publish()
    assert len(replaced) <= len(tags.collections)
    assert tags.collections["scalars"].tensor_names == {f"layer_{i}/loss" for i in range(5000)}
    assert sum(replaced) <= 3 * 5000


def _records(tmp_path: Path, tags: int) -> tuple[bytes, Any]:
    path = write_scalars(
        tmp_path / str(tags), {f"m_{i}/loss": [(0, 1.0), (1, 2.0)] for i in range(tags)}
    )
    blob = path.read_bytes()
    return blob, frame_records(blob, source="t")


@pytest.mark.parametrize("tags", [2000, 8000])
def test_grouping_records_by_tag_is_linear(
    tmp_path: Path, tags: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading 2N one-scalar records of N distinct tags, and applying them to a folder,
    compares a number of elements linear in N (before: every record once per tag, in
    ``simple_scalars``'s tag reading and again in ``apply_scalars``)."""
    blob, frames = _records(tmp_path, tags)
    buf = np.frombuffer(blob, np.uint8)
    original = frames_module.groups

    def counted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first, inverse = original(keys)
        return first, inverse.view(_Counting)

    monkeypatch.setattr(frames_module, "groups", counted)
    _Counting.touched = 0
    found = simple_scalars(buf, frames.starts, frames.lengths)
    assert len(found.tags) == tags and int(found.ok.sum()) == 2 * tags
    assert _Counting.touched <= 8 * 2 * tags

    _Counting.touched = 0
    counting = dataclasses.replace(found, tag_ids=found.tag_ids.view(_Counting))
    folder = Folder(ModeKeys.GLOBAL, file_version=2.0)
    apply_scalars(folder, counting, 0, len(found.ok), 0, TagCollections(None))
    assert len(folder.series) == tags
    assert _Counting.touched <= 8 * 2 * tags


def test_a_log_of_many_tags_opens_with_every_tag(tmp_path: Path) -> None:
    """5,000 tags: every tag is a tensor and in the scalars collection."""
    write_scalars(tmp_path / "log", {f"m_{i}/loss": [(0, 1.0), (1, 2.0)] for i in range(5000)})
    with create_trial(str(tmp_path / "log"), trial_format="tensorboard") as trial:
        assert len(trial.tensor_names()) == 5000
        assert len(trial.collection("scalars").tensor_names) == 5000
        assert trial.steps() == [0, 1]
