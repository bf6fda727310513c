"""Many TensorBoard records at once: framing with both CRCs, and one-scalar events as columns."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensorboard.frames import frame_records, groups, simple_scalars
from evaluator.formats.tensorboard.summary import simple_scalar
from evaluator.formats.tfrecord import encode_record, iter_records


def _scalar(tag: str, step: int, x: float) -> bytes:
    value = summary_pb2.Summary.Value(tag=tag, simple_value=x)
    event = event_pb2.Event(wall_time=1.5, step=step, summary=summary_pb2.Summary(value=[value]))
    return event.SerializeToString()


def _events() -> list[bytes]:
    """One-scalar events of many step widths and tag lengths, and events that are not."""
    out = [event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()]
    tags = ["a", "loss", "accuracy", "train/loss_1234", "gradients/" + "x" * 40, "é/ü"]
    for i, step in enumerate([0, 1, 127, 128, 16383, 16384, 2**21, 2**34, 2**35, 2**40, -1]):
        out.append(_scalar(tags[i % len(tags)], step, 1.0 / (i + 1)))
    histo = summary_pb2.HistogramProto(min=0.0, max=1.0, num=2, bucket_limit=[1.0], bucket=[2.0])
    value = summary_pb2.Summary.Value(tag="h", histo=histo)
    out.append(
        event_pb2.Event(step=3, summary=summary_pb2.Summary(value=[value])).SerializeToString()
    )
    two = [summary_pb2.Summary.Value(tag=t, simple_value=2.0) for t in ("p", "q")]
    out.append(event_pb2.Event(step=4, summary=summary_pb2.Summary(value=two)).SerializeToString())
    bad_tag = _scalar("tag\x00", 5, 3.0).replace(b"tag\x00", b"ta\xff\x00")  # not UTF-8
    out.append(bad_tag)
    out.append(event_pb2.Event(step=6, wall_time=2.0).SerializeToString())  # no summary
    return out


def test_frames_and_scalars_match_the_record_reader_and_the_one_event_decoder() -> None:
    """Every record is framed where the checked reader finds it, and each event is read as a
    one-scalar event exactly when the one-event decoder reads it, with its step, tag and
    value (steps of every varint width, tags of every length, UTF-8 or not)."""
    payloads = _events()
    blob = b"".join(encode_record(p, payload_crc=True) for p in payloads)
    frames = frame_records(blob, source="t")
    assert frames.end == len(blob) and frames.corrupt is None
    records = list(iter_records(blob, source="t"))
    assert frames.starts.tolist() == [r.offset + 12 for r in records]
    assert frames.lengths.tolist() == [r.length - 16 for r in records]
    got = simple_scalars(np.frombuffer(blob, np.uint8), frames.starts, frames.lengths)
    cache: dict[bytes, str] = {}
    for i, payload in enumerate(payloads):
        want = simple_scalar(payload, cache)
        if want is None or not 0 <= want[0] < 2**35:  # long step varints: the decoder
            assert not got.ok[i], i
            continue
        assert got.ok[i], i
        step, tag, value = want
        assert (got.steps[i], got.tags[got.tag_ids[i]], got.values[i]) == (
            step,
            tag,
            np.float32(value),
        )


def test_a_torn_last_record_ends_the_frames_before_it() -> None:
    """A record cut short (a writer still appending) is not framed and is no corruption; the
    frames end where it starts, so the next read resumes there."""
    records = [encode_record(_scalar("loss", s, 0.5), payload_crc=True) for s in range(1, 4)]
    whole = b"".join(records)
    for cut in range(1, len(records[2])):
        frames = frame_records(whole[:-cut], source="t")
        assert len(frames.starts) == 2 and frames.corrupt is None
        assert frames.end == len(records[0]) + len(records[1])


def test_a_corrupt_record_stops_framing_and_says_why() -> None:
    """A payload whose CRC is wrong ends the frames at its start with the reason; the
    records before it are kept."""
    records = [encode_record(_scalar("loss", s, 0.5), payload_crc=True) for s in range(4)]
    broken = bytearray(records[2])
    broken[20] ^= 0xFF
    blob = records[0] + records[1] + bytes(broken) + records[3]
    frames = frame_records(blob, source="t")
    assert len(frames.starts) == 2 and frames.end == len(records[0]) + len(records[1])
    assert frames.corrupt is not None and "CRC" in frames.corrupt
    at = frame_records(blob, source="t", at=1000).corrupt  # blob read from byte 1000 on
    assert at is not None and f"at byte offset {1000 + frames.end}:" in at


def test_limit_and_start_frame_a_file_in_parts() -> None:
    """Framing ``limit`` records at a time from where the last part ended gives every record
    once, and a full part is never mistaken for the file's end."""
    blob = b"".join(encode_record(_scalar("l", s, 1.0), payload_crc=True) for s in range(10))
    starts, pos = [], 0
    while True:
        part = frame_records(blob, source="t", start=pos, limit=3)
        starts += part.starts.tolist()
        pos = part.end
        assert part.corrupt is None
        if len(part.starts) < 3:
            break
    assert starts == [r.offset + 12 for r in iter_records(blob, source="t")]


def test_smdebug_footer_is_accepted() -> None:
    """smdebug's constant footer frames as the record reader accepts it."""
    blob = encode_record(_scalar("l", 1, 1.0)) * 2
    assert len(frame_records(blob, source="t").starts) == 2


@pytest.mark.parametrize("distinct", [1, 3, 16, 40])
def test_groups_is_unique_in_order_of_first_appearance(distinct: int) -> None:
    """``groups`` gives each row the group of its key and each group its first row, as
    ``np.unique`` would, for few and many distinct keys."""
    keys = np.random.default_rng(distinct).integers(0, distinct, 500)
    first, inverse = groups(keys)
    assert (keys[first][inverse] == keys).all()
    assert sorted(keys[first].tolist()) == np.unique(keys).tolist()
    assert all(keys[r] not in keys[:r] for r in first.tolist())


def test_next_record_finds_the_first_valid_record_after_garbage() -> None:
    """Resynchronising: zeros, a header whose length CRC is right but whose record is not
    whole, then a real record: its offset; within a window too short to reach it, None."""
    from evaluator.formats.tensorboard.frames import next_record
    from evaluator.formats.tfrecord import encode_record, length_crc

    fake = struct.pack("<QI", 1 << 33, length_crc(1 << 33))
    good = encode_record(b"payload", payload_crc=True)
    blob = bytes(5000) + fake + b"xyz" + good + bytes(10)
    assert next_record(blob, 0, window=len(blob)) == 5000 + len(fake) + 3
    assert next_record(blob, 0, window=4000) is None
    assert next_record(bytes(100_000), 0, window=100_000) is None
