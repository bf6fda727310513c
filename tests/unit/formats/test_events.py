"""Tensor events: byte-exact encoding, the decode paths, and agreement with smdebug's answers."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import CorruptRecordError, SMDebugValueError
from evaluator.formats.events import (
    TensorEvent,
    decode_record_value,
    decode_tensor_event,
    decode_tensor_value,
    encode_tensor_event,
)
from evaluator.formats.index_file import parse_index_file
from evaluator.formats.keys import parse_index_key
from evaluator.formats.proto.event_pb2 import Event
from evaluator.formats.proto.summary_pb2 import Summary
from evaluator.formats.tfrecord import encode_record, iter_records
from evaluator.modes import ModeKeys
from tests.unit.formats.fixture_files import DATA, EVENT_FILES, GOLDEN, INDEX_FILES, file_id

# Appendix A of the format reference: write_tensor(np.array([1.5, -2.0], float32), "w",
# mode=EVAL, mode_step=3, timestamp=1600000000.0) at global step 7.
APPENDIX_A = bytes.fromhex(
    "48 00 00 00 00 00 00 00 fe 92 48 9d"
    "09 00 00 00 00 84 d7 d7 41 10 07 2a 3b 0a 39 0a 01 77 42 17 08 01 12 09 12 07 08 02"
    "12 03 77 5f 32 22 08 00 00 c0 3f 00 00 00 c0 4a 1b"
    "0a 0e 0a 09" + b"mode_step".hex() + "12 01 33"
    "0a 09 0a 04" + b"mode".hex() + "12 01 32"
    "b3 c0 2d 06"
)


def appendix_a_payload() -> bytes:
    value = np.array([1.5, -2.0], np.float32)
    return encode_tensor_event(
        "w", value, step=7, mode=ModeKeys.EVAL, mode_step=3, wall_time=1600000000.0
    )


def test_appendix_a_bytes_reproduced() -> None:
    """encode_tensor_event + encode_record give the spec's annotated 88 bytes exactly."""
    assert len(APPENDIX_A) == 88
    assert encode_record(appendix_a_payload()) == APPENDIX_A


def test_decode_tensor_event_of_appendix_a() -> None:
    """decode_tensor_event returns tag, value, global step, wall time, mode and mode step."""
    event = decode_tensor_event(APPENDIX_A[12:-4])
    assert (event.tag, event.step, event.wall_time) == ("w", 7, 1600000000.0)
    assert (event.mode, event.mode_step) == (ModeKeys.EVAL, 3)
    np.testing.assert_array_equal(event.value, np.array([1.5, -2.0], np.float32))


def test_decode_record_value_of_appendix_a() -> None:
    """decode_record_value takes the whole framed record an index range selects."""
    value = decode_record_value(APPENDIX_A)
    assert value.dtype == np.float32 and value.tolist() == [1.5, -2.0]


def test_mode_step_defaults_to_the_global_step() -> None:
    """Without mode_step, smdebug stores the writer's global step."""
    event = decode_tensor_event(encode_tensor_event("t", 1.0, step=12, wall_time=1.0))
    assert (event.mode, event.mode_step) == (ModeKeys.GLOBAL, 12)


def test_step_zero_and_wall_time_zero_are_omitted() -> None:
    """proto3 defaults are not serialized: step 0 and wall time 0 leave no field."""
    payload = encode_tensor_event("t", np.zeros(0, np.float32), step=0, wall_time=0.0)
    assert payload[0] == 0x2A  # the summary is the first field
    event = decode_tensor_event(payload)
    assert (event.step, event.wall_time) == (0, 0.0) and event.value.shape == (0,)


def test_mode_must_be_a_mode_key() -> None:
    """A mode that is not a ModeKeys raises smdebug's message."""
    with pytest.raises(SMDebugValueError, match="mode can be one of ModeKeys.TRAIN, ModeKeys.EV"):
        encode_tensor_event("t", 1.0, step=0, mode="TRAIN", wall_time=1.0)  # type: ignore[arg-type]


def test_record_without_plugin_data_has_no_mode() -> None:
    """A tensor event without plugin data (another writer) decodes with mode None."""
    tensor = {"dtype": 1, "tensor_shape": {"dim": [{"size": 1}]}, "float_val": [2.0]}
    value = Summary.Value(tag="x", tensor=tensor)
    payload = Event(step=4, summary=Summary(value=[value])).SerializeToString()
    event = decode_tensor_event(payload)
    assert (event.mode, event.mode_step, event.value.tolist()) == (None, None, [2.0])


def test_value_that_is_not_a_tensor_is_refused() -> None:
    """A summary value whose oneof is not tensor raises "value is not tensor"."""
    summary = Summary(value=[Summary.Value(tag="x", simple_value=1.0)])
    payload = Event(summary=summary).SerializeToString()
    for decode in (decode_tensor_value, decode_tensor_event):
        with pytest.raises(SMDebugValueError, match="value is not tensor"):
            decode(payload)


def test_event_without_summary_is_refused() -> None:
    """An event with no summary value (e.g. a file_version event) is not a tensor record."""
    payload = Event(file_version="brain.Event:2").SerializeToString()
    with pytest.raises(SMDebugValueError, match="no summary value"):
        decode_tensor_value(payload)


def test_garbage_payload_is_a_value_error() -> None:
    """Bytes that are not an Event raise SMDebugValueError, not a protobuf error."""
    with pytest.raises(SMDebugValueError, match="not a valid Event"):
        decode_tensor_value(b"\xff\xff\xff")


def test_unknown_mode_in_plugin_data_is_refused() -> None:
    """A mode number outside ModeKeys is malformed."""
    meta = {"plugin_data": [{"plugin_name": "mode", "content": b"9"}]}
    value = Summary.Value(tag="x", metadata=meta, tensor={"dtype": 1, "float_val": [2.0]})
    with pytest.raises(SMDebugValueError, match="unknown mode"):
        decode_tensor_event(Event(summary=Summary(value=[value])).SerializeToString())


def test_decode_record_value_errors_name_source_and_offset() -> None:
    """A damaged or torn byte range reports its file and offset."""
    damaged = bytearray(APPENDIX_A)
    damaged[-1] ^= 1
    with pytest.raises(CorruptRecordError) as info:
        decode_record_value(bytes(damaged), source="events/f.tfevents", offset=300)
    assert (info.value.source, info.value.offset) == ("events/f.tfevents", 300)
    # an index range holds one whole record: a record longer than the range is corrupt
    with pytest.raises(CorruptRecordError, match="byte offset 300: .*holds 50"):
        decode_record_value(APPENDIX_A[:50], offset=300)


def test_tensor_event_is_frozen() -> None:
    """TensorEvent is immutable."""
    event = decode_tensor_event(appendix_a_payload())
    with pytest.raises(AttributeError):
        event.tag = "other"  # type: ignore[misc]
    assert isinstance(event, TensorEvent)


@pytest.mark.parametrize("path", EVENT_FILES, ids=file_id)
def test_every_fixture_record_re_encodes_byte_exact(path: Path) -> None:
    """Every record smdebug wrote is reproduced from its decoded fields, byte for byte."""
    data = path.read_bytes()
    for record in iter_records(data, source=str(path)):
        event = decode_tensor_event(record.payload)
        again = encode_tensor_event(
            event.tag,
            event.value,
            step=event.step,
            mode=event.mode or ModeKeys.GLOBAL,
            mode_step=event.mode_step,
            wall_time=event.wall_time,
        )
        assert again == record.payload, f"{event.tag} at offset {record.offset}"
        assert encode_record(again) == data[record.offset : record.offset + record.length]


@cache
def golden_tensors(scenario: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{scenario}.query.json").read_text())["tensors"]


def check_against_golden(value: np.ndarray, golden: dict[str, Any], name: str) -> None:
    """Compare with smdebug's answer, allowing for the deliberate decoding fixes."""
    if "error" in golden:
        assert golden["error"] == "KeyError" and value.dtype == np.int16, name  # smdebug: KeyError
        return
    assert list(value.shape) == golden["shape"], name
    assert hashlib.sha256(value.tobytes()).hexdigest() == golden["sha256"], name
    if value.dtype == np.int8:
        assert golden["dtype"] == "|u1", name  # smdebug reads int8 as uint8
    else:
        assert value.dtype.str == golden["dtype"], name


@pytest.mark.parametrize("path", INDEX_FILES, ids=file_id)
def test_index_ranges_decode_to_smdebug_values(path: Path) -> None:
    """Each indexed byte range decodes to the array smdebug 1.0.34 returned for it."""
    trial = path.parents[2]
    step, worker = parse_index_key(str(path.relative_to(DATA.parent)))
    index = parse_index_file(path.read_bytes())
    shaped = {s.tensorname for s in index.shapes}
    compared = 0
    for entry in index.tensors:
        assert index.meta.event_file_name is not None
        events = (trial / index.meta.event_file_name).read_bytes()
        chunk = events[entry.start_idx : entry.start_idx + entry.length]
        value = decode_record_value(chunk, source=str(path), offset=entry.start_idx)
        golden = golden_tensors(trial.name).get(entry.tensorname, {}).get("values", {})
        answer = golden.get(str(step), {}).get(worker)
        if answer is not None and entry.tensorname not in shaped:
            check_against_golden(value, answer, entry.tensorname)
            compared += 1
    assert compared or not index.tensors
