"""TrialWriter and StepWriter: smdebug's on-disk layout, meta rule and atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluator.formats import (
    Collection,
    IndexMeta,
    ReductionConfig,
    decode_record_value,
    decode_tensor_event,
    iter_records,
    parse_collections_file,
    parse_index_file,
    parse_index_key,
)
from evaluator.modes import ModeKeys
from evaluator.testing import StepWriter, TrialWriter, compute_reductions
from tests.unit.formats.fixture_files import INDEX_FILES, file_id

EVENTS_7 = "events/000000000007/000000000007_worker_0.tfevents"
INDEX_7 = "index/000000000/000000000007_worker_0.json"


def read_tensors(root: Path, index_key: str) -> dict[str, np.ndarray]:
    """Every tensor an index file points at, decoded from its byte range."""
    index = parse_index_file((root / index_key).read_bytes())
    assert index.meta.event_file_name is not None
    events = (root / index.meta.event_file_name).read_bytes()
    return {
        t.tensorname: decode_record_value(events[t.start_idx : t.start_idx + t.length])
        for t in index.tensors
    }


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_write_step_layout_and_values(tmp_path: Path) -> None:
    """write_step writes the event file and index file at smdebug's keys, readable back."""
    writer = TrialWriter(tmp_path)
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensors = {"w": weights, "loss": 0.5}
    writer.write_step(7, tensors, mode=ModeKeys.EVAL, mode_step=3, wall_time=1.0)
    assert all_files(tmp_path) == [EVENTS_7, INDEX_7]
    index = parse_index_file((tmp_path / INDEX_7).read_bytes())
    assert index.meta == IndexMeta(ModeKeys.EVAL, 3, EVENTS_7)
    values = read_tensors(tmp_path, INDEX_7)
    np.testing.assert_array_equal(values["w"], weights)
    assert values["loss"].shape == (1,) and values["loss"].dtype == np.float64


def test_index_json_layout(tmp_path: Path) -> None:
    """The index file is json.dumps with smdebug's key order."""
    TrialWriter(tmp_path).write_step(7, {"w": np.zeros(2, np.float32)}, wall_time=1.0)
    text = (tmp_path / INDEX_7).read_text()
    assert text.startswith('{"meta": {"mode": "GLOBAL", "mode_step": 7, "event_file_name": ')
    assert list(json.loads(text)) == ["meta", "tensor_payload", "shape_payload"]


def test_mode_step_defaults_to_step(tmp_path: Path) -> None:
    """Without mode_step, the global step is used, as smdebug's writer does."""
    TrialWriter(tmp_path).write_step(7, {"w": 1.0}, mode=ModeKeys.TRAIN)
    assert parse_index_file((tmp_path / INDEX_7).read_bytes()).meta.mode_step == 7


def test_shapes_only_step_has_no_event_file(tmp_path: Path) -> None:
    """A step with only shapes has an index file without event_file_name and no event file."""
    TrialWriter(tmp_path).write_step(7, {}, shapes={"w": (3, 4)}, mode=ModeKeys.TRAIN)
    assert all_files(tmp_path) == [INDEX_7]
    index = parse_index_file((tmp_path / INDEX_7).read_bytes())
    assert index.meta.event_file_name is None
    assert [(s.tensorname, s.originalname, s.shape) for s in index.shapes] == [("w", "w", (3, 4))]


def test_empty_step_writes_nothing(tmp_path: Path) -> None:
    """Nothing saved means no files, as smdebug's lazy writers."""
    TrialWriter(tmp_path).write_step(7, {})
    assert all_files(tmp_path) == []


def test_meta_comes_from_first_tensor_not_later_ones(tmp_path: Path) -> None:
    """A GLOBAL tensor written after an EVAL one is indexed as EVAL (smdebug's rule)."""
    with StepWriter(tmp_path, 7) as step:
        step.write_tensor(np.ones(2), "a", mode=ModeKeys.EVAL, mode_step=3)
        step.write_tensor(np.ones(2), "b", mode=ModeKeys.GLOBAL)
    meta = parse_index_file((tmp_path / INDEX_7).read_bytes()).meta
    assert (meta.mode, meta.mode_step) == (ModeKeys.EVAL, 3)


def test_first_tensor_replaces_meta_from_shapes(tmp_path: Path) -> None:
    """If shapes came first, the first tensor's mode, mode step and event file replace meta."""
    with StepWriter(tmp_path, 7) as step:
        step.write_shape("s", (2,), mode=ModeKeys.TRAIN, mode_step=1)
        step.write_tensor(np.ones(2), "a", mode=ModeKeys.EVAL, mode_step=3)
        step.write_shape("t", (2,), mode=ModeKeys.PREDICT, mode_step=9)
    meta = parse_index_file((tmp_path / INDEX_7).read_bytes()).meta
    assert (meta.mode, meta.mode_step, meta.event_file_name) == (ModeKeys.EVAL, 3, EVENTS_7)


def test_step_writer_refuses_writes_after_close(tmp_path: Path) -> None:
    """A closed StepWriter cannot take more data; closing twice is harmless."""
    step = TrialWriter(tmp_path).step_writer(7)
    step.write_tensor(1.0, "a")
    step.close()
    step.close()
    with pytest.raises(RuntimeError):
        step.write_tensor(1.0, "b")


def test_no_temporary_files_remain(tmp_path: Path) -> None:
    """Writes go through <name>.tmp and a rename; no .tmp file is left behind."""
    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("c")])
    writer.write_step(7, {"a": 1.0})
    writer.end_training()
    assert not [f for f in all_files(tmp_path) if f.endswith(".tmp")]


def test_end_training_touches_marker(tmp_path: Path) -> None:
    """end_training writes the empty training_job_end.ts."""
    TrialWriter(tmp_path).end_training()
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""


def test_write_collections(tmp_path: Path) -> None:
    """write_collections writes <worker>_collections.json with num_workers in _meta."""
    collections = [
        Collection("grads", include_regex=["^g"], reduction_config=ReductionConfig(norms=["l2"])),
        Collection("losses", tensor_names={"loss"}),
    ]
    TrialWriter(tmp_path, worker="worker_1").write_collections(collections, num_workers=2)
    path = tmp_path / "collections/000000000/worker_1_collections.json"
    parsed = parse_collections_file(path.read_bytes())
    assert parsed.num_workers == 2
    assert parsed.collections == {c.name: c for c in collections}


def test_tf_device_worker_file_names(tmp_path: Path) -> None:
    """A TF device worker is serialized in file names and parses back."""
    device = "/job:worker/replica:0/task:0/device:GPU:0"
    TrialWriter(tmp_path, worker=device).write_step(1, {"a": 1.0})
    (index_file,) = (tmp_path / "index").rglob("*.json")
    assert parse_index_key(str(index_file.relative_to(tmp_path))) == (1, device)


def test_reductions_are_saved_under_reduction_names(tmp_path: Path) -> None:
    """write_step saves reductions as smdebug/reductions/[abs_]<red>/<name>."""
    grad = np.array([[3.0, -4.0], [0.0, 1.0]], np.float32)
    reductions = {"g": compute_reductions(grad, ["mean", "abs_max", "l2", "abs_l1"])}
    TrialWriter(tmp_path).write_step(7, {}, reductions=reductions)
    values = read_tensors(tmp_path, INDEX_7)
    assert sorted(values) == [
        "smdebug/reductions/abs_l1/g",
        "smdebug/reductions/abs_max/g",
        "smdebug/reductions/l2/g",
        "smdebug/reductions/mean/g",
    ]
    assert values["smdebug/reductions/mean/g"].tolist() == [0.0]
    assert values["smdebug/reductions/abs_max/g"].tolist() == [4.0]
    assert values["smdebug/reductions/abs_l1/g"].tolist() == [8.0]
    assert values["smdebug/reductions/l2/g"].dtype == np.float32


def test_compute_reductions_semantics() -> None:
    """Norms are vector norms of the flattened values; std and variance use ddof=0."""
    value = np.arange(8, dtype=np.float64).reshape(2, 2, 2) - 3
    names = ["min", "max", "sum", "prod", "std", "variance", "l1", "l2", "abs_min"]
    out = compute_reductions(value, names)
    assert out["min"] == -3 and out["max"] == 4 and out["sum"] == 4 and out["prod"] == 0
    assert out["std"] == pytest.approx(np.std(value))
    assert out["variance"] == pytest.approx(np.var(value))
    assert out["l1"] == 16 and out["l2"] == pytest.approx(np.sqrt((value**2).sum()))
    assert out["abs_min"] == 0


def test_unknown_reduction_is_refused(tmp_path: Path) -> None:
    """Reduction keys outside smdebug's list raise ValueError."""
    with pytest.raises(ValueError, match="median"):
        compute_reductions(np.ones(3), ["median"])
    with pytest.raises(ValueError):
        TrialWriter(tmp_path).write_step(0, {}, reductions={"g": {"abs_norm": 1.0}})


@pytest.mark.parametrize("index_path", INDEX_FILES[::7], ids=file_id)
def test_rewriting_a_fixture_step_reproduces_smdebug_bytes(
    tmp_path: Path, index_path: Path
) -> None:
    """Writing a fixture step's decoded tensors and shapes again gives smdebug's exact files."""
    trial = index_path.parents[2]
    key = str(index_path.relative_to(trial))
    step, worker = parse_index_key(key)
    index = parse_index_file(index_path.read_bytes())
    with StepWriter(tmp_path, step, worker=worker) as writer:
        if index.meta.event_file_name:
            event_bytes = (trial / index.meta.event_file_name).read_bytes()
            for record in iter_records(event_bytes, source=index.meta.event_file_name):
                event = decode_tensor_event(record.payload)
                assert event.mode is not None
                writer.write_tensor(
                    event.value,
                    event.tag,
                    mode=event.mode,
                    mode_step=event.mode_step,
                    wall_time=event.wall_time,
                )
        for shape in index.shapes:
            writer.write_shape(
                shape.tensorname,
                shape.shape,
                original_name=shape.originalname,
                mode=index.meta.mode,
                mode_step=index.meta.mode_step,
            )
    assert (tmp_path / key).read_bytes() == index_path.read_bytes()
    if index.meta.event_file_name:
        rewritten = (tmp_path / index.meta.event_file_name).read_bytes()
        assert rewritten == (trial / index.meta.event_file_name).read_bytes()
