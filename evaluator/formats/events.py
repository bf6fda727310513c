"""smdebug tensor events: one ``Event`` per saved tensor, one tensor summary per event.

``decode_tensor_value`` is the hot path (one call per tensor a rule reads): it parses the
``Event`` with the C protobuf runtime and decodes ``summary.value[0].tensor``, nothing else.
``decode_tensor_event`` also returns the tag, steps and mode; the Trial does not need them (mode
and mode step come from the index file) but tests and tools do. ``encode_tensor_event`` produces
the exact bytes smdebug 1.0.34's ``FileWriter.write_tensor`` would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np
from google.protobuf.message import DecodeError

from evaluator.errors import SMDebugValueError
from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensor_codec import (
    decode_tensor_content,
    decode_tensor_proto,
    encode_tensor_proto,
    make_numpy_array,
)
from evaluator.formats.tfrecord import Buffer, parse_frame, smdebug_payload
from evaluator.modes import ModeKeys

__all__ = [
    "MODE_PLUGIN_NAME",
    "MODE_STEP_PLUGIN_NAME",
    "TensorEvent",
    "decode_record_value",
    "decode_tensor_event",
    "decode_tensor_value",
    "encode_tensor_event",
]

MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"

_Event = event_pb2.Event
_Summary = summary_pb2.Summary
_PluginData = summary_pb2.SummaryMetadata.PluginData
# protobuf's FromString takes any buffer (bytes, bytearray, memoryview); its stubs say bytes.
_parse_event = cast(Callable[[Buffer], event_pb2.Event], _Event.FromString)


@dataclass(frozen=True, slots=True, eq=False)
class TensorEvent:
    """A decoded tensor record. ``mode``/``mode_step`` are None when the record has no plugin data.

    Equality is identity: the ``value`` array has no single truth value to compare by.
    """

    tag: str
    value: np.ndarray
    step: int
    wall_time: float
    mode: ModeKeys | None
    mode_step: int | None


def decode_tensor_value(payload: Buffer) -> np.ndarray:
    """The array held by a serialized tensor ``Event`` (a record's payload)."""
    try:
        event = _parse_event(payload)
    except DecodeError as e:
        raise _not_an_event(e) from e
    values = event.summary.value
    if values:
        # An unset tensor reads as an empty default, so content proves the oneof is "tensor".
        array = decode_tensor_content(values[0].tensor)
        if array is not None:
            return array
    return decode_tensor_proto(_tensor_value(event).tensor)


def decode_record_value(
    record_bytes: bytes | bytearray | memoryview, *, source: str = "<bytes>", offset: int = 0
) -> np.ndarray:
    """The array of one whole framed record, as an index byte range selects it.

    ``offset`` is where the record sits in ``source``; it only labels errors.
    """
    payload = smdebug_payload(record_bytes)  # the common case, checked cheaply
    if payload is None:
        payload = parse_frame(record_bytes, source=source, label_offset=offset, exact=True)
    return decode_tensor_value(payload)


def decode_tensor_event(payload: Buffer) -> TensorEvent:
    """Everything a tensor ``Event`` says: tag, value, global step, wall time, mode, mode step."""
    event = _parse(payload)
    value = _tensor_value(event)
    mode, mode_step = _mode_of(value.metadata.plugin_data)
    return TensorEvent(
        tag=value.tag,
        value=decode_tensor_proto(value.tensor),
        step=event.step,
        wall_time=event.wall_time,
        mode=mode,
        mode_step=mode_step,
    )


def encode_tensor_event(
    tag: str,
    value: object,
    *,
    step: int,
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
    wall_time: float,
) -> bytes:
    """The serialized ``Event`` smdebug writes for ``FileWriter(step=step).write_tensor(...)``.

    ``mode_step`` defaults to ``step``, as in smdebug. Frame it with ``encode_record``.
    """
    if not isinstance(mode, ModeKeys):
        names = ", ".join(f"ModeKeys.{m.name}" for m in ModeKeys)
        raise SMDebugValueError(f"mode can be one of {names}")
    if mode_step is None:
        mode_step = step
    # smdebug's order: mode_step first, then mode.
    plugin_data = [
        _PluginData(plugin_name=MODE_STEP_PLUGIN_NAME, content=str(mode_step).encode()),
        _PluginData(plugin_name=MODE_PLUGIN_NAME, content=str(mode.value).encode()),
    ]
    tensor = encode_tensor_proto(make_numpy_array(value), tag)
    summary_value = _Summary.Value(tag=tag, tensor=tensor, metadata={"plugin_data": plugin_data})
    event = _Event(wall_time=wall_time, step=step, summary=_Summary(value=[summary_value]))
    return event.SerializeToString()


def _parse(payload: Buffer) -> event_pb2.Event:
    try:
        return _parse_event(payload)
    except DecodeError as e:
        raise _not_an_event(e) from e


def _not_an_event(error: DecodeError) -> SMDebugValueError:
    return SMDebugValueError(f"record payload is not a valid Event: {error}")


def _tensor_value(event: event_pb2.Event) -> summary_pb2.Summary.Value:
    values = event.summary.value
    if not values:
        raise SMDebugValueError("event holds no summary value")
    value = values[0]
    if value.WhichOneof("value") != "tensor":
        raise SMDebugValueError("value is not tensor")
    return value


def _mode_of(plugin_data: Iterable[_PluginData]) -> tuple[ModeKeys | None, int | None]:
    mode: ModeKeys | None = None
    mode_step: int | None = None
    for item in plugin_data:
        if item.plugin_name == MODE_PLUGIN_NAME:
            mode = _parse_mode(item.content)
        elif item.plugin_name == MODE_STEP_PLUGIN_NAME:
            mode_step = _parse_int(item.content, MODE_STEP_PLUGIN_NAME)
    return mode, mode_step


def _parse_mode(content: bytes) -> ModeKeys:
    number = _parse_int(content, MODE_PLUGIN_NAME)
    try:
        return ModeKeys(number)
    except ValueError:
        raise SMDebugValueError(
            f"plugin data 'mode' holds unknown mode {content.decode(errors='replace')!r}"
        ) from None


def _parse_int(content: bytes, name: str) -> int:
    try:
        return int(content)
    except ValueError:
        shown = content.decode(errors="replace")
        raise SMDebugValueError(f"plugin data {name!r} is not an integer: {shown!r}") from None
