"""The generated protobuf modules: package, field numbers and DataType values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from evaluator.formats.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

REPO = Path(__file__).resolve().parents[3]


def fields(message: object) -> dict[str, tuple[int, int]]:
    """name -> (number, type) of a message's fields."""
    descriptor = message.DESCRIPTOR  # type: ignore[attr-defined]
    return {f.name: (f.number, f.type) for f in descriptor.fields}


T = descriptor_pb2.FieldDescriptorProto


def test_package_is_neither_tensorflow_nor_smdebug() -> None:
    """Our descriptors live in ruleeval.tfevent, so TensorFlow's or smdebug's can load beside."""
    assert event_pb2.Event.DESCRIPTOR.full_name == "ruleeval.tfevent.Event"
    assert tensor_pb2.DESCRIPTOR.package == "ruleeval.tfevent"


def test_event_fields() -> None:
    """Event keeps TensorFlow's field numbers."""
    assert fields(event_pb2.Event) == {
        "wall_time": (1, T.TYPE_DOUBLE),
        "step": (2, T.TYPE_INT64),
        "file_version": (3, T.TYPE_STRING),
        "graph_def": (4, T.TYPE_BYTES),
        "summary": (5, T.TYPE_MESSAGE),
        "log_message": (6, T.TYPE_MESSAGE),
        "session_log": (7, T.TYPE_MESSAGE),
        "tagged_run_metadata": (8, T.TYPE_MESSAGE),
        "meta_graph_def": (9, T.TYPE_BYTES),
    }


def test_summary_value_fields() -> None:
    """Summary.Value and PluginData keep the spec's numbers; plugin content is bytes (the
    wire form of smdebug's string; TensorBoard plugins put binary protobufs there)."""
    value = fields(summary_pb2.Summary.Value)
    assert {k: v[0] for k, v in value.items()} == {
        "node_name": 7,
        "tag": 1,
        "metadata": 9,
        "simple_value": 2,
        "obsolete_old_style_histogram": 3,
        "image": 4,
        "histo": 5,
        "audio": 6,
        "tensor": 8,
    }
    assert fields(summary_pb2.SummaryMetadata.PluginData) == {
        "plugin_name": (1, T.TYPE_STRING),
        "content": (2, T.TYPE_BYTES),
    }


def test_tensor_proto_fields() -> None:
    """TensorProto has the spec's fields plus TensorFlow's uint32_val (16) and uint64_val (17)."""
    assert {k: v[0] for k, v in fields(tensor_pb2.TensorProto).items()} == {
        "dtype": 1,
        "tensor_shape": 2,
        "version_number": 3,
        "tensor_content": 4,
        "half_val": 13,
        "float_val": 5,
        "double_val": 6,
        "int_val": 7,
        "string_val": 8,
        "scomplex_val": 9,
        "int64_val": 10,
        "bool_val": 11,
        "dcomplex_val": 12,
        "resource_handle_val": 14,
        "uint32_val": 16,
        "uint64_val": 17,
    }
    assert fields(tensor_shape_pb2.TensorShapeProto.Dim) == {
        "size": (1, T.TYPE_INT64),
        "name": (2, T.TYPE_STRING),
    }


def test_data_type_values() -> None:
    """DataType has every value 0..25 and each *_REF as value + 100."""
    values = dict(types_pb2.DataType.items())
    assert values["DT_FLOAT"] == 1 and values["DT_HALF"] == 19 and values["DT_FLOAT8_E4M3FN"] == 25
    plain = {k: v for k, v in values.items() if not k.endswith("_REF")}
    assert sorted(plain.values()) == list(range(26))
    for name, number in plain.items():
        if number:
            assert values[f"{name}_REF"] == number + 100


def test_generated_code_is_current(tmp_path: Path) -> None:
    """Regenerating from the .proto files reproduces the checked-in modules."""
    pytest.importorskip("grpc_tools")
    out = tmp_path / "out"
    out.mkdir()
    proto_dir = REPO / "evaluator" / "formats" / "proto"
    protos = sorted(str(p.relative_to(REPO)) for p in proto_dir.glob("*.proto"))
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", "."]
    cmd += [f"--python_out={out}", f"--pyi_out={out}"]
    subprocess.run(cmd + protos, cwd=REPO, check=True)
    for generated in (out / "evaluator/formats/proto").iterdir():
        checked_in = REPO / "evaluator/formats/proto" / generated.name
        assert generated.read_bytes() == checked_in.read_bytes(), generated.name
