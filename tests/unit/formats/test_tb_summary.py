"""The wire-format fast path of TensorBoard scalar events agrees with the protobuf decode."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensorboard.summary import Histogram, parse_event, simple_scalar


def _scalar_event(step: int, tag: str, value: float, wall_time: float = 1.5) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300, 2**40, 2**63 - 1, -1, -7])
@pytest.mark.parametrize("tag", ["a", "loss/train", "é" * 40, "x" * 110])
@pytest.mark.parametrize("value", [0.0, 1.5, -3.25e-7, 3e38, math.inf, math.nan])
def test_simple_scalar_equals_the_protobuf_decode(step: int, tag: str, value: float) -> None:
    """A one-scalar event gives the step, tag and float32 value the protobuf decode gives."""
    payload = _scalar_event(step, tag, value)
    expected = parse_event(payload, {}, source="test")
    found = simple_scalar(payload, {})
    assert found is not None
    assert found[0] == expected.step
    assert found[1] == expected.data[0].tag
    np.testing.assert_array_equal(np.float32(found[2]), expected.data[0].value)


def test_other_events_are_left_to_the_protobuf_decode() -> None:
    """Anything but exactly one simple_value scalar is not read by the fast path."""
    two = summary_pb2.Summary(
        value=[
            summary_pb2.Summary.Value(tag="a", simple_value=1.0),
            summary_pb2.Summary.Value(tag="b", simple_value=2.0),
        ]
    )
    histo = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="h", histo=summary_pb2.HistogramProto(num=1))]
    )
    events = [
        event_pb2.Event(wall_time=1.0, step=3, summary=two),
        event_pb2.Event(wall_time=1.0, step=3, summary=histo),
        event_pb2.Event(wall_time=1.0, file_version="brain.Event:2"),
        event_pb2.Event(
            wall_time=1.0,
            step=3,
            session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START),
        ),
    ]
    payloads = [e.SerializeToString() for e in events]
    payloads.append(_scalar_event(3, "t" * 200, 1.0))  # a tag longer than one length byte
    payloads.append(_scalar_event(3, "a", 1.0, wall_time=0.0))  # no wall_time field
    payloads.append(_scalar_event(3, "a", 1.0) + b"\x00")  # bytes after the summary
    payloads.append(_scalar_event(3, "a", 1.0)[:-2])  # cut short
    payloads.append(b"")
    for payload in payloads:
        assert simple_scalar(payload, {}) is None


def test_invalid_utf8_tag_is_left_to_the_protobuf_decode() -> None:
    """A tag that is not UTF-8 is not read by the fast path (the decode reports it)."""
    payload = bytearray(_scalar_event(3, "ab", 1.0))
    payload[payload.index(b"ab")] = 0xFF
    assert simple_scalar(bytes(payload), {}) is None


def test_abs_mean_spreads_the_bucket_holding_zero() -> None:
    """The bucket across zero counts its values spread evenly for the mean of absolutes;
    the others count them at their middle."""
    buckets = np.array([[-3.0, -1.0, 2.0], [-1.0, 3.0, 4.0], [3.0, 5.0, 2.0]])
    h = Histogram(-3.0, 5.0, 8.0, None, None, buckets)
    spread = (1.0 + 9.0) / (2 * 4.0)  # mean of |x| for x uniform on [-1, 3]
    expected = (2 * 2.0 + 4 * spread + 2 * 4.0) / 8
    assert h.reductions()[("mean", True)] == pytest.approx(expected, rel=1e-15)
    assert h.reductions()[("mean", False)] == pytest.approx((2 * -2.0 + 4 * 1.0 + 2 * 4.0) / 8)
