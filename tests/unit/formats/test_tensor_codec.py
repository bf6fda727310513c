"""TensorProto <-> numpy: smdebug's writer rules and the fixed reader."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evaluator.errors import SMDebugTypeError, SMDebugValueError, UnsupportedDtypeError
from evaluator.formats.proto.tensor_pb2 import TensorProto
from evaluator.formats.proto.types_pb2 import DataType
from evaluator.formats.tensor_codec import (
    decode_tensor_proto,
    encode_tensor_proto,
    make_numpy_array,
    proto_dtype_of,
)

NUMERIC_DTYPES = [
    ("float16", DataType.DT_HALF),
    ("float32", DataType.DT_FLOAT),
    ("float64", DataType.DT_DOUBLE),
    ("int8", DataType.DT_INT8),
    ("int16", DataType.DT_INT16),
    ("int32", DataType.DT_INT32),
    ("int64", DataType.DT_INT64),
    ("uint8", DataType.DT_UINT8),
    ("uint16", DataType.DT_UINT16),
    ("uint32", DataType.DT_UINT32),
    ("uint64", DataType.DT_UINT64),
    ("bool", DataType.DT_BOOL),
    ("complex64", DataType.DT_COMPLEX64),
    ("complex128", DataType.DT_COMPLEX128),
]
DTYPE_NAMES = [name for name, _ in NUMERIC_DTYPES]


def sample(dtype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    """Values that exercise the dtype: negatives, extremes, fractions, complex parts."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        extremes = [info.max, info.min, 0, 1, info.max // 3, info.min // 3 + 1]
        return np.resize(np.array(extremes, dtype=dt), shape)
    if dt.kind == "c":
        return (np.linspace(-2, 2, n) + 1j * np.linspace(3, -3, n)).astype(dt).reshape(shape)
    return np.linspace(-3.25, 7.5, n).astype(dt).reshape(shape)


def typed(dtype: Any, shape: tuple[int, ...], **fields: Any) -> TensorProto:
    """A TensorProto built the way TensorFlow writes small constants: typed value fields."""
    return TensorProto(dtype=dtype, tensor_shape={"dim": [{"size": d} for d in shape]}, **fields)


@pytest.mark.parametrize(("dtype", "enum"), NUMERIC_DTYPES, ids=DTYPE_NAMES)
def test_content_round_trip_keeps_dtype(dtype: str, enum: int) -> None:
    """Every numeric dtype round-trips through tensor_content with its dtype and shape."""
    value = sample(dtype)
    proto = encode_tensor_proto(value, "t")
    assert proto.dtype == enum
    out = decode_tensor_proto(proto)
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out, value)


def test_int8_stays_int8() -> None:
    """int8 decodes as int8 with negatives intact (smdebug returns uint8, -1 as 255)."""
    out = decode_tensor_proto(encode_tensor_proto(np.array([-128, -1, 0, 127], np.int8), "t"))
    assert out.dtype == np.int8
    assert out.tolist() == [-128, -1, 0, 127]


@pytest.mark.parametrize("dtype", ["int16", "uint16", "uint32", "uint64", "complex64"])
def test_types_smdebug_cannot_read_decode(dtype: str) -> None:
    """int16, uint16/32/64 and complex64 decode (smdebug raises KeyError)."""
    value = sample(dtype, (5,))
    np.testing.assert_array_equal(decode_tensor_proto(encode_tensor_proto(value, "t")), value)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_empty_tensor_decodes_to_empty_array(dtype: str) -> None:
    """A size-0 tensor decodes to an empty array of its dtype and shape (smdebug can't)."""
    out = decode_tensor_proto(encode_tensor_proto(np.zeros((0, 3), dtype), "t"))
    assert out.dtype == np.dtype(dtype) and out.shape == (0, 3)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_zero_dimensional_round_trip(dtype: str) -> None:
    """A 0-d array keeps shape ()."""
    value = np.array(sample(dtype, (1,))[0])
    out = decode_tensor_proto(encode_tensor_proto(value, "t"))
    assert out.shape == () and out == value


def test_decoded_array_is_writable_and_owns_its_data() -> None:
    """Rules may modify what they read: the array is a writable copy."""
    out = decode_tensor_proto(encode_tensor_proto(np.arange(4.0), "t"))
    assert out.flags.writeable and out.flags.owndata
    out[0] = 5.0


def test_fortran_order_input_is_written_c_order() -> None:
    """A Fortran-ordered array is saved in C order, as ndarray.tostring() did."""
    value = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    proto = encode_tensor_proto(value, "t")
    assert proto.tensor_content == np.ascontiguousarray(value).tobytes()
    np.testing.assert_array_equal(decode_tensor_proto(proto), value)


def test_big_endian_input_is_written_little_endian() -> None:
    """A big-endian array is saved little-endian and reads back equal."""
    value = np.arange(3, dtype=">f8")
    proto = encode_tensor_proto(value, "t")
    assert proto.tensor_content == np.arange(3, dtype="<f8").tobytes()
    np.testing.assert_array_equal(decode_tensor_proto(proto), value)


def test_dim_names_are_tag_and_size() -> None:
    """Every dim is named f"{tag}_{size}": shape (2, 2) gives two dims named arr_2."""
    proto = encode_tensor_proto(np.zeros((2, 2, 5), np.float32), "arr")
    dims = [(d.size, d.name) for d in proto.tensor_shape.dim]
    assert dims == [(2, "arr_2"), (2, "arr_2"), (5, "arr_5")]


# ---- typed value fields (other writers) -------------------------------------------------------


@pytest.mark.parametrize(
    ("enum", "field", "values", "expected"),
    [
        (DataType.DT_FLOAT, "float_val", [1.5, -2.0], np.array([1.5, -2.0], np.float32)),
        (DataType.DT_DOUBLE, "double_val", [1.25, 3.0], np.array([1.25, 3.0])),
        (DataType.DT_INT32, "int_val", [-7, 9], np.array([-7, 9], np.int32)),
        (DataType.DT_INT16, "int_val", [-300, 300], np.array([-300, 300], np.int16)),
        (DataType.DT_INT8, "int_val", [-128, 127], np.array([-128, 127], np.int8)),
        (DataType.DT_UINT8, "int_val", [0, 255], np.array([0, 255], np.uint8)),
        (DataType.DT_UINT16, "int_val", [0, 65535], np.array([0, 65535], np.uint16)),
        (DataType.DT_INT64, "int64_val", [-(2**40), 2**40], np.array([-(2**40), 2**40])),
        (DataType.DT_UINT32, "uint32_val", [0, 2**32 - 1], np.array([0, 2**32 - 1], np.uint32)),
        (DataType.DT_UINT64, "uint64_val", [0, 2**64 - 1], np.array([0, 2**64 - 1], np.uint64)),
        (DataType.DT_BOOL, "bool_val", [True, False], np.array([True, False])),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_typed_value_fields_decode(
    enum: int, field: str, values: list[object], expected: np.ndarray
) -> None:
    """Each dtype decodes from its typed value field with the right numpy dtype."""
    out = decode_tensor_proto(typed(enum, (2,), **{field: values}))
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_half_val_holds_float16_bit_patterns() -> None:
    """half_val stores float16 bit patterns in int32s."""
    expected = np.array([1.0, -2.5, 65504.0], np.float16)
    bits = expected.view(np.uint16).astype(np.int32).tolist()
    out = decode_tensor_proto(typed(DataType.DT_HALF, (3,), half_val=bits))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    ("enum", "field", "dtype"),
    [
        (DataType.DT_COMPLEX64, "scomplex_val", np.complex64),
        (DataType.DT_COMPLEX128, "dcomplex_val", np.complex128),
    ],
)
def test_complex_values_are_interleaved_pairs(enum: int, field: str, dtype: type) -> None:
    """scomplex_val/dcomplex_val hold (real, imag) pairs."""
    out = decode_tensor_proto(typed(enum, (2,), **{field: [1.0, 2.0, -3.0, 0.5]}))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.array([1 + 2j, -3 + 0.5j], dtype))


def test_odd_number_of_complex_parts_is_an_error() -> None:
    """A complex tensor needs whole (real, imag) pairs."""
    with pytest.raises(SMDebugValueError):
        decode_tensor_proto(typed(DataType.DT_COMPLEX64, (1,), scomplex_val=[1.0, 2.0, 3.0]))


def test_single_typed_value_fills_the_shape() -> None:
    """TensorFlow's rule: one typed value is repeated over the whole shape."""
    out = decode_tensor_proto(typed(DataType.DT_FLOAT, (2, 3), float_val=[7.0]))
    np.testing.assert_array_equal(out, np.full((2, 3), 7.0, np.float32))


def test_no_typed_values_mean_zeros() -> None:
    """TensorFlow's rule: no values for a non-empty shape means zeros."""
    out = decode_tensor_proto(typed(DataType.DT_INT32, (3,)))
    assert out.dtype == np.int32 and out.tolist() == [0, 0, 0]


def test_wrong_number_of_typed_values_is_an_error() -> None:
    """Neither 0, 1 nor the shape's size of values is malformed."""
    with pytest.raises(SMDebugValueError, match="needs 4 values, has 2"):
        decode_tensor_proto(typed(DataType.DT_FLOAT, (4,), float_val=[1.0, 2.0]))


def test_content_not_matching_the_shape_is_an_error() -> None:
    """tensor_content whose size does not fit the shape is malformed."""
    proto = typed(DataType.DT_FLOAT, (3,), tensor_content=b"\0" * 8)
    with pytest.raises(SMDebugValueError, match="does not fit"):
        decode_tensor_proto(proto)


def test_content_not_a_multiple_of_the_item_size_is_an_error() -> None:
    """tensor_content must hold whole elements."""
    with pytest.raises(SMDebugValueError):
        decode_tensor_proto(typed(DataType.DT_FLOAT, (1,), tensor_content=b"\0" * 5))


def test_unknown_dimension_is_an_error() -> None:
    """A -1 dimension (unknown size) cannot be decoded into an array."""
    with pytest.raises(SMDebugValueError, match="unknown"):
        decode_tensor_proto(typed(DataType.DT_FLOAT, (-1, 2), tensor_content=b"\0" * 16))


def test_reference_types_decode_as_their_base_type() -> None:
    """DT_FLOAT_REF holds float32 values like DT_FLOAT."""
    out = decode_tensor_proto(typed(DataType.DT_FLOAT_REF, (2,), float_val=[1.0, 2.0]))
    assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "enum",
    [
        DataType.DT_BFLOAT16,
        DataType.DT_QINT8,
        DataType.DT_QUINT8,
        DataType.DT_QINT16,
        DataType.DT_QUINT16,
        DataType.DT_QINT32,
        DataType.DT_RESOURCE,
        DataType.DT_VARIANT,
        DataType.DT_FLOAT8_E5M2,
        DataType.DT_FLOAT8_E4M3FN,
        DataType.DT_BFLOAT16_REF,
        77,
    ],
)
def test_dtypes_numpy_cannot_hold_raise_unsupported(enum: int) -> None:
    """DataTypes without a numpy type raise UnsupportedDtypeError, also a KeyError."""
    proto = typed(enum, (2,), tensor_content=b"\0\0\0\0")
    with pytest.raises(UnsupportedDtypeError) as info:
        decode_tensor_proto(proto)
    assert isinstance(info.value, KeyError) and isinstance(info.value, SMDebugValueError)
    assert info.value.dtype_enum == enum
    assert str(enum) in str(info.value)


# ---- strings -----------------------------------------------------------------------------------


def test_string_tensor_is_written_without_dtype() -> None:
    """Strings: no dtype, dims named after the tag, one UTF-8 string_val per element."""
    proto = encode_tensor_proto(np.array(["ab", "c"]), "s")
    assert proto.dtype == 0
    shape = bytes.fromhex("12 09 12 07 08 02 12 03") + b"s_2"
    assert proto.SerializeToString() == shape + b"\x42\x02ab" + b"\x42\x01c"


def test_string_round_trip_utf8() -> None:
    """Non-ASCII strings round-trip as a numpy unicode array."""
    value = np.array(["héllo", "", "日本"])
    out = decode_tensor_proto(encode_tensor_proto(value, "s"))
    assert out.dtype.kind == "U"
    assert out.tolist() == ["héllo", "", "日本"]


def test_empty_string_tensor() -> None:
    """An empty 1-D string array round-trips to an empty unicode array."""
    out = decode_tensor_proto(encode_tensor_proto(np.array([], dtype=str), "s"))
    assert out.dtype.kind == "U" and out.shape == (0,)


def test_dt_string_with_string_val_decodes() -> None:
    """A DT_STRING tensor (TensorFlow's spelling) decodes its string_val too."""
    out = decode_tensor_proto(typed(DataType.DT_STRING, (2, 1), string_val=[b"x", b"yz"]))
    assert out.shape == (2, 1) and out.ravel().tolist() == ["x", "yz"]


def test_bytes_and_object_strings_are_written() -> None:
    """bytes ('S') and object arrays of str are saved as string tensors."""
    for value in (np.array([b"ab", b"c"]), np.array(["ab", "c"], dtype=object)):
        assert decode_tensor_proto(encode_tensor_proto(value, "s")).tolist() == ["ab", "c"]


def test_multidimensional_strings_are_refused_like_smdebug() -> None:
    """smdebug can only write 1-D string tensors; so can we."""
    with pytest.raises(SMDebugValueError, match="1-D"):
        encode_tensor_proto(np.array([["a"], ["b"]]), "s")


def test_invalid_utf8_string_is_an_error() -> None:
    """A string_val that is not UTF-8 raises SMDebugValueError."""
    with pytest.raises(SMDebugValueError, match="UTF-8"):
        decode_tensor_proto(typed(0, (1,), string_val=[b"\xff"]))


# ---- smdebug's value rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "shape"),
    [
        (3, np.int64, (1,)),
        (2.5, np.float64, (1,)),
        (True, np.bool_, (1,)),
        (np.float32(1.5), np.float32, (1,)),
        (np.array(1.5, np.float32), np.float32, ()),
        ([1, 2, 3], np.int64, (3,)),
        ((1.0, 2.0), np.float64, (2,)),
        ("text", np.dtype("<U4"), (1,)),
    ],
)
def test_make_numpy_array_rules(value: object, dtype: Any, shape: tuple[int, ...]) -> None:
    """Scalars become shape (1,), 0-d arrays stay 0-d, lists and tuples go through asarray."""
    array = make_numpy_array(value)
    assert array.dtype == np.dtype(dtype) and array.shape == shape


@pytest.mark.parametrize("value", [None, {"a": 1}, object()])
def test_make_numpy_array_rejects_other_types(value: object) -> None:
    """Other types raise SMDebugTypeError (also a TypeError)."""
    with pytest.raises(SMDebugTypeError):
        make_numpy_array(value)


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype("datetime64[s]"),
        np.dtype("timedelta64[s]"),
        np.dtype("V4"),
        np.dtype([("a", "<f4")]),
        pytest.param(
            np.dtype(np.longdouble),
            marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="no f16"),
        ),
    ],
    ids=str,
)
def test_unsupported_numpy_dtypes_are_refused(dtype: np.dtype) -> None:
    """Numpy dtypes smdebug's writer does not map raise SMDebugTypeError."""
    with pytest.raises(SMDebugTypeError, match="not supported"):
        proto_dtype_of(dtype)


def test_a_huge_filled_shape_is_refused_before_allocating() -> None:
    """One float claiming a 250,000,000-element shape is refused, not expanded to 1 GB."""
    from evaluator.formats.proto.tensor_pb2 import TensorProto
    from evaluator.formats.proto.tensor_shape_pb2 import TensorShapeProto
    from evaluator.formats.proto.types_pb2 import DT_FLOAT
    from evaluator.formats.tensor_codec import MAX_FILLED_ELEMENTS, decode_tensor_proto

    tensor = TensorProto(dtype=DT_FLOAT, float_val=[1.0])
    tensor.tensor_shape.CopyFrom(TensorShapeProto(dim=[TensorShapeProto.Dim(size=250_000_000)]))
    with pytest.raises(SMDebugValueError, match=f"over the limit of {MAX_FILLED_ELEMENTS}"):
        decode_tensor_proto(tensor)
    small = TensorProto(dtype=DT_FLOAT, float_val=[2.0])
    small.tensor_shape.CopyFrom(TensorShapeProto(dim=[TensorShapeProto.Dim(size=3)]))
    assert decode_tensor_proto(small).tolist() == [2.0, 2.0, 2.0]


def test_a_shape_of_more_dimensions_than_numpy_holds_is_a_value_error() -> None:
    """65 dimensions of size 1 holding one float: SMDebugValueError naming the limit, not
    numpy's ValueError from reshape (which ended a run with exit 3)."""
    from evaluator.formats.proto.tensor_pb2 import TensorProto
    from evaluator.formats.proto.tensor_shape_pb2 import TensorShapeProto
    from evaluator.formats.proto.types_pb2 import DT_FLOAT
    from evaluator.formats.tensor_codec import MAX_DIMENSIONS, decode_tensor_proto

    dims = [TensorShapeProto.Dim(size=1)] * (MAX_DIMENSIONS + 1)
    for tensor in (
        TensorProto(dtype=DT_FLOAT, float_val=[1.0]),
        TensorProto(dtype=DT_FLOAT, tensor_content=b"\0\0\x80\x3f"),
    ):
        tensor.tensor_shape.CopyFrom(TensorShapeProto(dim=dims))
        with pytest.raises(SMDebugValueError, match=f"over numpy's limit of {MAX_DIMENSIONS}"):
            decode_tensor_proto(tensor)
