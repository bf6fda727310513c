"""Property: random arrays written by TrialWriter read back equal, in bytes that follow the spec."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from evaluator.formats import (
    FOOTER_MAGIC,
    decode_record_value,
    iter_records,
    parse_index_file,
)
from evaluator.formats.proto.event_pb2 import Event
from evaluator.formats.tensor_codec import make_numpy_array
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter

NUMERIC = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]  # fmt: skip
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
# No lone surrogates (not UTF-8) and no NUL (numpy strips trailing NULs from its strings).
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)

numeric_arrays = st.sampled_from(NUMERIC).flatmap(lambda dt: hnp.arrays(np.dtype(dt), SHAPES))
ONE_D = hnp.array_shapes(min_dims=1, max_dims=1, min_side=0, max_side=4)
string_arrays = hnp.arrays(np.dtype("<U6"), ONE_D, elements=TEXT)  # smdebug writes 1-D only
python_scalars = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans())
values = st.one_of(numeric_arrays, numeric_arrays, string_arrays, python_scalars)
tensor_names = st.text(st.sampled_from("abc/_:.0123"), min_size=1, max_size=12)


def assert_same(decoded: np.ndarray, original: object) -> None:
    expected = make_numpy_array(original)
    assert decoded.shape == expected.shape
    if expected.dtype.kind == "U":
        assert decoded.dtype.kind == "U" and decoded.tolist() == expected.tolist()
        return
    assert decoded.dtype == expected.dtype
    np.testing.assert_array_equal(decoded, expected)  # NaN-aware


def assert_record_follows_spec(record_bytes: bytes, name: str, original: object) -> None:
    """Footer constant; dims named <tag>_<size>; strings without dtype."""
    assert record_bytes[-4:] == FOOTER_MAGIC
    tensor = Event.FromString(record_bytes[12:-4]).summary.value[0].tensor
    expected = make_numpy_array(original)
    dims = [(d.size, d.name) for d in tensor.tensor_shape.dim]
    assert dims == [(s, f"{name}_{s}") for s in expected.shape]
    assert (tensor.dtype == 0) == (expected.dtype.kind == "U")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tensors=st.dictionaries(tensor_names, values, min_size=1, max_size=4),
    step=st.integers(0, 10**7),
    mode=st.sampled_from(list(ModeKeys)),
    mode_step=st.none() | st.integers(0, 10**6),
)
def test_random_tensors_round_trip(
    tensors: dict[str, object], step: int, mode: ModeKeys, mode_step: int | None
) -> None:
    """Any supported array, 0-d and empty included, reads back equal from the files written."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        writer = TrialWriter(root, worker="worker_3")
        writer.write_step(step, tensors, mode=mode, mode_step=mode_step, wall_time=5.0)
        (index_path,) = (root / "index").rglob("*.json")
        text = index_path.read_text()
        document = json.loads(text)
        assert list(document) == ["meta", "tensor_payload", "shape_payload"]
        assert list(document["meta"]) == ["mode", "mode_step", "event_file_name"]
        index = parse_index_file(text)
        expected_mode_step = step if mode_step is None else mode_step
        assert (index.meta.mode, index.meta.mode_step) == (mode, expected_mode_step)
        assert index.meta.event_file_name is not None
        events = (root / index.meta.event_file_name).read_bytes()
        assert sum(r.length for r in iter_records(events, source="e")) == len(events)
        assert [t.tensorname for t in index.tensors] == list(tensors)
        for entry in index.tensors:
            chunk = events[entry.start_idx : entry.start_idx + entry.length]
            assert_record_follows_spec(chunk, entry.tensorname, tensors[entry.tensorname])
            assert_same(decode_record_value(chunk), tensors[entry.tensorname])
