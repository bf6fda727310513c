"""``TensorProto`` <-> ``numpy.ndarray``, with smdebug's writer rules and a fixed reader.

Writing follows smdebug 1.0.34's ``FileWriter.write_tensor`` byte for byte: numbers go to
``tensor_content`` as C-order little-endian bytes, every dim is named ``f"{tag}_{size}"``, and
strings get no dtype, one UTF-8 ``string_val`` per element, 1-D only.

Reading decodes every dtype numpy can hold, from ``tensor_content`` or from the typed value
fields (TensorFlow's rules). smdebug's reader, by contrast, turns int8 into uint8, raises
``KeyError`` for int16, the wide unsigned types and complex64, and cannot read an empty float
tensor. DataTypes numpy has no type for (bfloat16, quantized, resource, variant, float8) raise
``UnsupportedDtypeError``, which is also a ``KeyError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from evaluator.errors import SMDebugTypeError, SMDebugValueError, UnsupportedDtypeError
from evaluator.formats.proto import tensor_pb2, tensor_shape_pb2, types_pb2

__all__ = [
    "MAX_DIMENSIONS",
    "MAX_FILLED_ELEMENTS",
    "content_dtype",
    "decode_tensor_content",
    "decode_tensor_proto",
    "encode_tensor_proto",
    "make_numpy_array",
    "proto_dtype_of",
]

TensorProto = tensor_pb2.TensorProto
_Dim = tensor_shape_pb2.TensorShapeProto.Dim
_DT = types_pb2.DataType
_REF_OFFSET = 100  # DT_X_REF == DT_X + 100

# DataType -> little-endian numpy dtype of tensor_content.
_CONTENT_DTYPE: dict[int, np.dtype[Any]] = {
    _DT.DT_HALF: np.dtype("<f2"),
    _DT.DT_FLOAT: np.dtype("<f4"),
    _DT.DT_DOUBLE: np.dtype("<f8"),
    _DT.DT_INT8: np.dtype("i1"),
    _DT.DT_INT16: np.dtype("<i2"),
    _DT.DT_INT32: np.dtype("<i4"),
    _DT.DT_INT64: np.dtype("<i8"),
    _DT.DT_UINT8: np.dtype("u1"),
    _DT.DT_UINT16: np.dtype("<u2"),
    _DT.DT_UINT32: np.dtype("<u4"),
    _DT.DT_UINT64: np.dtype("<u8"),
    _DT.DT_BOOL: np.dtype("?"),
    _DT.DT_COMPLEX64: np.dtype("<c8"),
    _DT.DT_COMPLEX128: np.dtype("<c16"),
}
# Reference types hold the same values as their base type.
_CONTENT_DTYPE.update({k + _REF_OFFSET: v for k, v in list(_CONTENT_DTYPE.items())})

# numpy (kind, itemsize) -> DataType, as smdebug's writer maps them.
_PROTO_DTYPE: dict[tuple[str, int], int] = {
    (dt.kind, dt.itemsize): enum for enum, dt in _CONTENT_DTYPE.items() if enum < _REF_OFFSET
}
_STRING_KINDS = frozenset("USO")


def _half_values(values: Sequence[int]) -> np.ndarray:
    # half_val carries float16 bit patterns, one per int32.
    return np.asarray(values, dtype=np.int32).astype(np.uint16).view(np.float16)


def _complex_values(parts: type) -> Callable[[Sequence[float]], np.ndarray]:
    def convert(values: Sequence[float]) -> np.ndarray:
        flat: np.ndarray = np.asarray(values, dtype=parts)
        if flat.size % 2:
            raise SMDebugValueError("complex tensor has an odd number of (real, imag) parts")
        return flat.view(np.complex64 if parts is np.float32 else np.complex128)

    return convert


# DataType -> (typed value field, conversion of its values to numpy).
_TYPED_FIELD: dict[int, tuple[str, Callable[[Sequence[Any]], np.ndarray]]] = {
    _DT.DT_HALF: ("half_val", _half_values),
    _DT.DT_COMPLEX64: ("scomplex_val", _complex_values(np.float32)),
    _DT.DT_COMPLEX128: ("dcomplex_val", _complex_values(np.float64)),
}


def _typed_values(source: str, target: np.dtype[Any]) -> Callable[[Sequence[Any]], np.ndarray]:
    # int_val holds int8/uint8/int16/uint16 widened to int32; astype narrows them back.
    return lambda values: np.asarray(values, dtype=source).astype(target, copy=False)


for _enum, _field, _source in (
    (_DT.DT_FLOAT, "float_val", "<f4"),
    (_DT.DT_DOUBLE, "double_val", "<f8"),
    (_DT.DT_INT8, "int_val", "<i4"),
    (_DT.DT_INT16, "int_val", "<i4"),
    (_DT.DT_INT32, "int_val", "<i4"),
    (_DT.DT_UINT8, "int_val", "<i4"),
    (_DT.DT_UINT16, "int_val", "<i4"),
    (_DT.DT_INT64, "int64_val", "<i8"),
    (_DT.DT_UINT32, "uint32_val", "<u4"),
    (_DT.DT_UINT64, "uint64_val", "<u8"),
    (_DT.DT_BOOL, "bool_val", "?"),
):
    _TYPED_FIELD[_enum] = (_field, _typed_values(_source, _CONTENT_DTYPE[_enum]))


# --------------------------------------------------------------------------------------------
# Decoding


def decode_tensor_proto(tensor: TensorProto) -> np.ndarray:
    """The numpy array a ``TensorProto`` holds (a new, writable array)."""
    array = decode_tensor_content(tensor)
    return _decode_without_content(tensor) if array is None else array


def content_dtype(enum: int) -> np.dtype[Any] | None:
    """The little-endian numpy dtype of ``tensor_content`` for DataType ``enum``, if numeric."""
    return _CONTENT_DTYPE.get(enum)


def decode_tensor_content(tensor: TensorProto) -> np.ndarray | None:
    """The fast path: the array in ``tensor_content`` if it has any and a numeric dtype, else None.

    That is every tensor smdebug writes except strings and empty tensors.
    """
    content = tensor.tensor_content
    if content:
        dtype = _CONTENT_DTYPE.get(tensor.dtype)
        if dtype is not None:
            return _decode_content(tensor, content, dtype)
    return None


def _decode_content(tensor: TensorProto, content: bytes, dtype: np.dtype[Any]) -> np.ndarray:
    # The hot path: one frombuffer and one copy. Most tensors are 1-D, and then the element
    # count alone checks the shape.
    if len(content) % dtype.itemsize == 0:
        flat = np.frombuffer(content, dtype)
        dims = tensor.tensor_shape.dim
        if len(dims) == 1 and dims[0].size == flat.size:
            return flat.copy()
        shape = _shape(tensor)
        if flat.size == _size(shape):
            return flat.reshape(shape).copy()
    shape = _shape(tensor)
    raise SMDebugValueError(
        f"tensor_content has {len(content)} bytes, which does not fit shape {shape} of {dtype.name}"
    )


def _decode_without_content(tensor: TensorProto) -> np.ndarray:
    enum = tensor.dtype
    dtype = _CONTENT_DTYPE.get(enum)
    if dtype is not None:
        return _decode_typed(tensor, enum, dtype)
    if enum in (_DT.DT_INVALID, _DT.DT_STRING, _DT.DT_STRING_REF):
        return _decode_strings(tensor)
    raise UnsupportedDtypeError(enum, _dtype_name(enum))


def _decode_typed(tensor: TensorProto, enum: int, dtype: np.dtype[Any]) -> np.ndarray:
    field, convert = _TYPED_FIELD[enum - _REF_OFFSET if enum > _REF_OFFSET else enum]
    values = getattr(tensor, field)
    flat = convert(values) if len(values) else np.empty(0, dtype)
    return _fill(flat, _shape(tensor), dtype, zero=0)


def _decode_strings(tensor: TensorProto) -> np.ndarray:
    try:
        text = [s.decode("utf-8") for s in tensor.string_val]
    except UnicodeDecodeError as e:
        raise SMDebugValueError(f"string tensor holds invalid UTF-8: {e}") from e
    flat = np.array(text, dtype=np.str_)
    return _fill(flat, _shape(tensor), flat.dtype, zero="")


# TensorFlow lets one value (or none) fill a whole shape; smdebug's writer always saves every
# value, so a record claiming more filled elements than this is hostile or broken.
MAX_FILLED_ELEMENTS = 1 << 24
# numpy's own limit on an array's dimensions: a shape of more is refused before it is built.
MAX_DIMENSIONS = 64


def _fill(
    flat: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any], zero: object
) -> np.ndarray:
    """Apply TensorFlow's rules: one value fills the shape, no values means zeros."""
    size = _size(shape)
    if flat.size == size:
        return flat.reshape(shape)
    if size > MAX_FILLED_ELEMENTS:
        # A few bytes must not become gigabytes: real writers save every value.
        raise SMDebugValueError(
            f"tensor of shape {shape} would be filled from {flat.size} value(s) to {size} "
            f"elements, over the limit of {MAX_FILLED_ELEMENTS}"
        )
    if flat.size == 1:
        return np.full(shape, flat[0], dtype=dtype)
    if flat.size == 0:
        return np.full(shape, zero, dtype=dtype)
    raise SMDebugValueError(f"tensor of shape {shape} needs {size} values, has {flat.size}")


def _shape(tensor: TensorProto) -> tuple[int, ...]:
    dims = tensor.tensor_shape.dim
    if len(dims) > MAX_DIMENSIONS:
        raise SMDebugValueError(
            f"tensor shape has {len(dims)} dimensions, over numpy's limit of {MAX_DIMENSIONS}"
        )
    shape = tuple(d.size for d in dims)
    if any(d < 0 for d in shape):
        raise SMDebugValueError(f"tensor shape {shape} has unknown dimensions")
    return shape


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


def _dtype_name(enum: int) -> str:
    try:
        return str(_DT.Name(enum))
    except ValueError:
        return f"DataType({enum})"


# --------------------------------------------------------------------------------------------
# Encoding


def make_numpy_array(value: object) -> np.ndarray:
    """smdebug's conversion: arrays as is (0-d stays 0-d), scalars to shape (1,), lists/tuples."""
    if isinstance(value, np.ndarray):
        return value
    if np.isscalar(value):
        return np.array([value])
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    raise SMDebugTypeError(f"cannot save a value of type {type(value).__name__} as a tensor")


def proto_dtype_of(dtype: np.dtype[Any]) -> int:
    """The DataType smdebug's writer gives a numeric numpy dtype; SMDebugTypeError if none."""
    enum = _PROTO_DTYPE.get((dtype.kind, dtype.itemsize))
    if enum is None or dtype.fields is not None:
        raise SMDebugTypeError(f"Numpy Datatype: {dtype} is currently not supported")
    return enum


def encode_tensor_proto(value: np.ndarray, tag: str) -> TensorProto:
    """The ``TensorProto`` smdebug writes for ``value`` saved under ``tag``."""
    dims = [_Dim(size=d, name=f"{tag}_{d}") for d in value.shape]
    if value.dtype.kind in _STRING_KINDS:
        return TensorProto(tensor_shape={"dim": dims}, string_val=_string_values(value))
    enum = proto_dtype_of(value.dtype)
    if value.dtype.byteorder == ">":
        value = value.astype(value.dtype.newbyteorder("<"))
    dtype = cast(types_pb2.DataType, enum)
    return TensorProto(dtype=dtype, tensor_shape={"dim": dims}, tensor_content=value.tobytes())


def _string_values(value: np.ndarray) -> list[bytes]:
    if value.ndim != 1:
        raise SMDebugValueError(f"string tensors must be 1-D, got shape {value.shape}")
    out = []
    for item in value.tolist():
        if isinstance(item, str):
            out.append(item.encode("utf-8"))
        elif isinstance(item, bytes):
            out.append(item)
        else:
            raise SMDebugTypeError(f"cannot save {type(item).__name__} in a string tensor")
    return out
