"""TensorBoard event files: what their summaries hold, as pure functions (bytes in, values out).

TensorBoard's files use the same TFRecord framing and ``Event`` protobuf as smdebug's (with the
payload CRC in the footer). Each ``Summary.Value`` is one of:

* a scalar: ``simple_value`` (torch, tensorboardX), or a tensor summary whose plugin is
  ``scalars`` (``tf.summary``, Keras, ``new_style`` writers);
* a histogram: ``HistogramProto`` (torch, tensorboardX: exact ``sum`` and ``sum_squares``), or a
  ``[k, 3]`` tensor of (left edge, right edge, count) whose plugin is ``histograms`` (TF2: only
  min, max and count are exact);
* any other numeric tensor summary (its value as written);
* images, audio, text and other non-numeric data: skipped.

A TF2 writer sends a tag's plugin metadata with its first value only: callers remember the
plugin per tag (``plugin_of``) and pass it back for the values that come without it.

``Histogram`` turns either histogram form into reductions: the exact ones, and those only the
buckets can give, each with the error bound stated in its docstring.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
from google.protobuf.message import DecodeError

from evaluator.errors import SMDebugValueError
from evaluator.formats.histogram import Histogram, histogram_from_reductions
from evaluator.formats.metric_names import phase_of_folder, phase_of_tag
from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensor_codec import decode_tensor_proto
from evaluator.formats.tfrecord import Buffer

__all__ = [
    "EVENT_FILE_PATTERN",
    "MAX_HISTOGRAM_BUCKETS",
    "Histogram",
    "ParsedEvent",
    "SummaryDatum",
    "histogram_from_reductions",
    "is_event_file",
    "parse_event",
    "phase_of_folder",
    "phase_of_tag",
    "simple_scalar",
]

#: The name every TensorBoard writer gives its files (``tf.summary``, torch, tensorboardX, Keras).
EVENT_FILE_PATTERN = re.compile(r"(?:^|/)events\.out\.tfevents\.[^/]+$")

#: Buckets a histogram may have: TensorFlow's default edges make about 1,550, torch's and
#: Keras' fewer. A record claiming more is refused before any array is made of it.
MAX_HISTOGRAM_BUCKETS = 1 << 16

SCALARS_PLUGIN = "scalars"
HISTOGRAMS_PLUGIN = "histograms"
# Plugins whose tensors are not numbers a rule reads (bytes, or empty tensors carrying metadata).
_SKIPPED_PLUGINS = frozenset(
    {"images", "audio", "text", "hparams", "graph", "projector", "mesh", "custom_scalars"}
)


_Event = event_pb2.Event
_parse = cast(Callable[[Buffer], event_pb2.Event], _Event.FromString)
_START = event_pb2.SessionLog.START


def is_event_file(key: str) -> bool:
    """Whether ``key`` (a path or an object key) names a TensorBoard event file."""
    return EVENT_FILE_PATTERN.search(key) is not None


@dataclass(frozen=True, slots=True)
class SummaryDatum:
    """One value of a summary: its tag, the plugin it belongs to, and what it holds."""

    tag: str
    kind: Literal["scalar", "histogram", "tensor"]
    value: np.ndarray | np.generic | Histogram  # a 0-d scalar: a numpy scalar


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    """An event's step and wall time, its summary values, what kind of event it is
    (``file_version``, ``start`` for SessionLog.START, ``summary``, ``other``), the file
    version string, and the plugin names first seen on tags in this event."""

    step: int
    wall_time: float
    what: Literal["file_version", "start", "summary", "other"]
    data: list[SummaryDatum]
    file_version: str = ""
    plugins: dict[str, str] | None = None


def parse_event(payload: Buffer, plugin_of: dict[str, str], *, source: str) -> ParsedEvent:
    """Decode one event-file record's payload. ``plugin_of`` maps tags to the plugin their
    first value named (it is read, and also updated with the plugins this event names)."""
    try:
        event = _parse(payload)
    except DecodeError as e:
        raise SMDebugValueError(f"{source}: record is not a valid Event: {e}") from e
    what = event.WhichOneof("what")
    if what == "summary":
        data = [d for d in (_datum(v, plugin_of) for v in event.summary.value) if d is not None]
        return ParsedEvent(event.step, event.wall_time, "summary", data)
    if what == "file_version":
        return ParsedEvent(event.step, event.wall_time, "file_version", [], event.file_version)
    if what == "session_log" and event.session_log.status == _START:
        return ParsedEvent(event.step, event.wall_time, "start", [])
    return ParsedEvent(event.step, event.wall_time, "other", [])


_WALL_TIME = struct.Struct("<d")
_FLOAT = struct.Struct("<f")


def simple_scalar(payload: bytes, tags: dict[bytes, str]) -> tuple[int, str, float] | None:
    """(step, tag, value) of an event that is exactly one ``simple_value`` scalar summary
    (what torch and tensorboardX write for each ``add_scalar``), read straight off the wire
    format: wall_time (field 1), step (field 2), summary (field 5) holding one value of a tag
    (field 1) and a simple_value (field 2), nothing else. None for any other event, which
    ``parse_event`` then decodes. ``tags`` caches tag bytes -> str (read and filled)."""
    try:
        if payload[0] != 0x09:  # wall_time, fixed64
            return None
        pos = 9
        byte = payload[pos]
        step = 0
        if byte == 0x10:  # step, varint
            shift = 0
            pos += 1
            while True:
                byte = payload[pos]
                pos += 1
                step |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            if step >= 1 << 63:
                step -= 1 << 64
            byte = payload[pos]
        # summary (field 5), one value (Summary field 1), tag, simple_value: lengths < 128
        if byte != 0x2A or payload[pos + 2] != 0x0A or payload[pos + 4] != 0x0A:
            return None
        size = payload[pos + 1]
        n = payload[pos + 5]
        end = pos + 2 + size
        if (
            size >= 0x80
            or n >= 0x80
            or end != len(payload)
            or payload[pos + 3] != size - 2
            or pos + 6 + n + 5 != end
            or payload[pos + 6 + n] != 0x15
        ):
            return None
        raw = payload[pos + 6 : pos + 6 + n]
        tag = tags.get(raw)
        if tag is None:
            tag = raw.decode()
            if len(tags) < 65536:
                tags[raw] = tag
        (value,) = _FLOAT.unpack_from(payload, end - 4)
        return step, tag, value
    except (IndexError, UnicodeDecodeError):
        return None


def _datum(value: summary_pb2.Summary.Value, plugin_of: dict[str, str]) -> SummaryDatum | None:
    kind = value.WhichOneof("value")
    tag = value.tag
    if kind == "simple_value":
        return SummaryDatum(tag, "scalar", np.float32(value.simple_value))
    if kind == "histo":
        return SummaryDatum(tag, "histogram", _from_proto(value.histo))
    if kind != "tensor":
        return None  # images, audio, old-style histograms: nothing a rule reads
    tag = tag or value.node_name
    plugins = value.metadata.plugin_data
    if plugins:
        plugin_of[tag] = plugins[0].plugin_name
    plugin = plugin_of.get(tag, "")
    if plugin in _SKIPPED_PLUGINS:
        return None
    try:
        array = decode_tensor_proto(value.tensor)
    except SMDebugValueError:
        return None  # a dtype numpy cannot hold (resources, variants)
    if array.dtype.kind not in "biuf":
        return None  # strings: text, encoded images
    if plugin == HISTOGRAMS_PLUGIN and array.ndim == 2 and array.shape[1] == 3:
        return SummaryDatum(tag, "histogram", _from_tensor(array))
    if plugin == SCALARS_PLUGIN and array.size == 1:
        return SummaryDatum(tag, "scalar", array.reshape(())[()])
    return SummaryDatum(tag, "tensor", array)


def _from_proto(h: summary_pb2.HistogramProto) -> Histogram:
    """A HistogramProto, with TensorBoard's own bucket edges: the first bucket starts at
    ``min``, the last ends at ``max``, the others end at their ``bucket_limit``."""
    _check_buckets(min(len(h.bucket_limit), len(h.bucket)))
    limits = list(h.bucket_limit)
    counts = list(h.bucket)
    k = min(len(limits), len(counts))
    if k:  # one array of the three columns, made at once
        inner = limits[: k - 1]
        flat = np.array([h.min, *inner, *inner, h.max, *counts[:k]], dtype=np.float64)
        buckets = flat.reshape(3, k).T
    else:
        buckets = np.zeros((0, 3), dtype=np.float64)
    return Histogram(h.min, h.max, h.num, h.sum, h.sum_squares, buckets)


def _from_tensor(array: np.ndarray) -> Histogram:
    """A TF2 ``[k, 3]`` histogram: min and max are the outer edges of the non-empty buckets."""
    _check_buckets(len(array))
    buckets = np.asarray(array, dtype=np.float64).reshape(-1, 3)
    counts = buckets[:, 2]
    count = float(np.sum(counts))
    full = np.flatnonzero(counts > 0)
    if not len(full):
        return Histogram(math.nan, math.nan, count, None, None, buckets)
    lo, hi = float(buckets[full[0], 0]), float(buckets[full[-1], 1])
    return Histogram(min(lo, hi), max(lo, hi), count, None, None, buckets)


def _check_buckets(count: int) -> None:
    if count > MAX_HISTOGRAM_BUCKETS:
        raise SMDebugValueError(
            f"histogram of {count} buckets, over the limit of {MAX_HISTOGRAM_BUCKETS}"
        )
