"""The learned-layout decode: the same arrays as the checked decode, or the checked path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evaluator.errors import CorruptRecordError
from evaluator.formats.events import decode_record_value, encode_tensor_event
from evaluator.formats.proto.event_pb2 import Event
from evaluator.formats.record_plans import _FilePlan
from evaluator.formats.record_values import RecordLayouts
from evaluator.formats.tfrecord import encode_record
from evaluator.modes import ModeKeys

VALUES: list[Any] = [
    np.arange(256, dtype=np.float32),
    np.arange(12, dtype=np.float64).reshape(3, 4),
    np.array([[1, -2], [3, 4]], dtype=np.int8),
    np.array(7.5, dtype=np.float32),
    np.array([True, False, True]),
    np.arange(200, dtype=np.int64),
]


def record(value: Any, *, tag: str = "t", step: int = 1, mode_step: int | None = None) -> bytes:
    payload = encode_tensor_event(
        tag, value, step=step, mode=ModeKeys.TRAIN, mode_step=mode_step, wall_time=1.5
    )
    return encode_record(payload)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{v.dtype}{list(v.shape)}")
def test_after_one_checked_read_every_step_reads_fast_and_equal(value: Any) -> None:
    """After one checked read, the tensor's records at other steps read by layout, equal;
    longer metadata (a mode step with more digits) is learned again once."""
    layouts = RecordLayouts()
    first = record(value, step=1, mode_step=1)
    assert layouts.fast(first, 0, len(first), "t") is None  # nothing learned yet
    assert same(layouts.decode(first, "t", event_key="e", offset=0), value)
    for step in (2, 130, 70_000, 2**40):
        value = np.asarray(value + 1 if value.dtype != np.bool_ else ~value, dtype=value.dtype)
        data = b"xx" + record(value, step=step, mode_step=5)
        got = layouts.fast(data, 2, len(data) - 2, "t")
        assert got is not None and same(got, value)
        got[...] = 0  # a private, writable array
        assert same(layouts.fast(data, 2, len(data) - 2, "t"), value)  # type: ignore[arg-type]
    longer = record(value, step=3, mode_step=123456)
    assert layouts.fast(longer, 0, len(longer), "t") is None
    assert same(layouts.decode(longer, "t", event_key="e", offset=0), value)
    assert same(layouts.fast(longer, 0, len(longer), "t"), value)  # type: ignore[arg-type]


def test_a_changed_shape_or_tag_is_not_read_by_the_old_layout() -> None:
    """A record whose tag, dtype or shape differs from the learned one goes the checked way."""
    layouts = RecordLayouts()
    first = record(np.zeros(4, np.float32))
    layouts.decode(first, "t", event_key="e", offset=0)
    for other in (
        record(np.zeros(5, np.float32)),
        record(np.zeros((2, 2), np.float32)),
        record(np.zeros(4, np.float64)),
        record(np.zeros(4, np.float32), tag="u"),
    ):
        assert layouts.fast(other, 0, len(other), "t") is None
        assert same(layouts.decode(other, "t", event_key="e", offset=0), decode_record_value(other))


def test_records_the_layout_cannot_prove_go_the_checked_way() -> None:
    """Torn records, a payload CRC footer, a bad length CRC, a second tensor field and string
    tensors are never read by layout: the checked path reads them or says what is wrong."""
    value = np.arange(8, dtype=np.float32)
    layouts = RecordLayouts()
    good = record(value)
    layouts.decode(good, "t", event_key="e", offset=0)
    payload = good[12:-4]
    twice = Event.FromString(payload)
    twice.summary.value[0].tensor.tensor_content = (value + 1).tobytes()
    cases = {
        "torn": good[:-9],
        "payload crc": encode_record(payload, payload_crc=True),
        "bad length crc": good[:8] + b"\0\0\0\0" + good[12:],
        "second tensor": encode_record(payload + twice.SerializeToString()),
    }
    for name, data in cases.items():
        assert layouts.fast(data, 0, len(data), "t") is None, name
    np.testing.assert_array_equal(
        layouts.decode(cases["payload crc"], "t", event_key="e", offset=0), value
    )
    with pytest.raises(CorruptRecordError):
        layouts.decode(cases["bad length crc"], "t", event_key="e", offset=0)
    strings = record(np.array(["a", "b"]))
    assert layouts.decode(strings, "s", event_key="e", offset=0).tolist() == ["a", "b"]
    assert layouts.fast(strings, 0, len(strings), "s") is None


def test_errors_of_the_checked_path_name_the_event_file() -> None:
    """The checked path's errors name the file (prefix + event key) and the offset."""
    layouts = RecordLayouts(source_prefix="s3://b/p/")
    bad = record(np.zeros(3, np.float32))
    bad = bad[:8] + b"\0\0\0\0" + bad[12:]
    with pytest.raises(CorruptRecordError, match="s3://b/p/events/x.tfevents"):
        layouts.decode(bad, "t", event_key="events/x.tfevents", offset=40)


def test_many_records_of_one_file_read_in_one_loop_as_one_by_one() -> None:
    """``fast_many`` fills exactly the asked positions whose layout is learned, with read-only
    views equal to the checked decode; unlearned keys and torn records are left as they were."""
    layouts = RecordLayouts()
    values = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "g": np.arange(4, dtype=np.float64),
        "new": np.ones(3, np.float32),
    }
    for name in ("w", "g"):
        learned = record(values[name] * 0, tag=name, step=1)
        layouts.decode(learned, name, event_key="e", offset=0)
    records = [record(values[n], tag=n, step=9) for n in ("w", "g", "new")]
    torn = record(values["g"], tag="g", step=9)[:-3]
    lo = 100  # the bytes held start at file offset 100
    data = b"".join(records) + torn
    keys = ("w", "g", "new", "g")
    starts, at = [], lo
    for r in (*records, torn):
        starts.append(at)
        at += len(r)
    lengths = [len(r) for r in records] + [len(torn) + 3]
    out: list[Any] = [None, None, None, "kept"]
    layouts.fast_many(data, lo, keys, starts, lengths, [0, 1, 2, 3], out)
    assert same(out[0], values["w"]) and same(out[1], values["g"])
    assert out[2] is None  # no layout learned for "new": the checked path reads it
    assert out[3] == "kept"  # the torn record is left to the checked path
    assert not out[0].flags.writeable  # views of the bytes: the reader hands out copies
    only: list[Any] = [None] * 4
    layouts.fast_many(data, lo, keys, starts, lengths, [1], only)
    assert only[0] is None and same(only[1], values["g"])
    # Bytes held from the second record on: the first lies before them (here its very bytes
    # end the buffer, where a negative offset would find them), the torn one past them.
    part = records[1] + records[0]
    rest: list[Any] = [None] * 4
    layouts.fast_many(part, starts[1], keys, starts, lengths, [0, 1, 3], rest)
    assert rest[0] is None and same(rest[1], values["g"]) and rest[3] is None


def test_train_and_eval_records_of_a_tensor_both_stay_learned() -> None:
    """A hook interleaving TRAIN and EVAL steps numbers each mode's steps on its own, so the
    mode step in the metadata has more digits in one mode than in the other: records of two
    lengths per tensor. Once each is learned, neither goes the checked way again."""
    layouts = RecordLayouts()
    value = np.arange(16, dtype=np.float32)

    def saved(mode: ModeKeys, step: int) -> bytes:
        mode_step = 1000 + step if mode == ModeKeys.TRAIN else step  # 4 digits against 2
        payload = encode_tensor_event(
            "t", value + step, step=step, mode=mode, mode_step=mode_step, wall_time=1.5
        )
        return encode_record(payload)

    train, evaluation = saved(ModeKeys.TRAIN, 10), saved(ModeKeys.EVAL, 11)
    assert len(train) != len(evaluation)
    for data in (train, evaluation):
        layouts.decode(data, "t", event_key="e", offset=0)
    for step in range(20, 30):
        mode = ModeKeys.EVAL if step % 2 else ModeKeys.TRAIN
        data = saved(mode, step)
        got = layouts.fast(data, 0, len(data), "t")
        assert got is not None and same(got, value + step), (mode, step)


def _file(values: dict[str, Any], *, step: int, mode_step: int | None = None) -> bytes:
    return b"".join(record(v, tag=n, step=step, mode_step=mode_step) for n, v in values.items())


def _offsets(data_records: list[bytes], lo: int) -> tuple[list[int], list[int]]:
    starts, at = [], lo
    for r in data_records:
        starts.append(at)
        at += len(r)
    return starts, [len(r) for r in data_records]


def _spy_on_plans(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What every file plan's ``fill`` answers from now on (True: read by the plan)."""
    filled: list[bool] = []
    plan_fill = _FilePlan.fill

    def spy(self: _FilePlan, buf: bytes, out: list[Any]) -> bool:
        filled.append(plan_fill(self, buf, out))
        return filled[-1]

    monkeypatch.setattr(_FilePlan, "fill", spy)
    return filled


UNIFORM = {f"layer{i}": np.arange(64, dtype=np.float32) + i for i in range(6)}
MIXED = {
    "w": np.arange(12, dtype=np.float64).reshape(3, 4),
    "b": np.arange(5, dtype=np.float32),
    "i": np.array([[1, -2], [3, 4]], dtype=np.int8),
    "s": np.array(7.5, dtype=np.float32),
    "m": np.arange(200, dtype=np.int64),
}


SCALARS = {f"loss{i}": np.array(0.5 + i, dtype=np.float32) for i in range(5)}


@pytest.mark.parametrize("values", [UNIFORM, MIXED, SCALARS], ids=["one-kind", "mixed", "scalars"])
def test_a_file_like_the_last_one_reads_as_the_loop_reads_it(
    values: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After two files' records are all decoded at one place, a file with the same records at
    the same offsets is checked in one step (``_FilePlan``). Whatever differs in it (framing, the
    step's varint, dtype or shape bytes, what follows the values, a shorter buffer), each
    position gets what the record-by-record loop gives it."""
    layouts = RecordLayouts()
    names = tuple(values)
    for name in names:
        first = record(values[name], tag=name, step=1, mode_step=10)
        layouts.decode(first, name, event_key="e", offset=0)
    lo = 40
    records = [record(values[n], tag=n, step=1, mode_step=10) for n in names]
    starts, lengths = _offsets(records, lo)
    wanted = list(range(len(names)))

    def read(data: bytes, keys: Any) -> list[Any]:
        out: list[Any] = [None] * len(names)
        layouts.fast_many(data, lo, keys, starts, lengths, list(wanted), out)
        return out

    # Decoded by the loop twice: the place is noted, then planned.
    read(b"".join(records), names)
    read(b"".join(records), names)
    filled = _spy_on_plans(monkeypatch)
    following = {n: np.asarray(v + 1, v.dtype) for n, v in values.items()}
    candidates = {"next step": _file(following, step=2, mode_step=11)}
    # Step 128 takes two varint bytes, mode step 1 one digit fewer: the same lengths.
    candidates["longer varint"] = _file(values, step=128, mode_step=1)
    assert len(candidates["longer varint"]) == len(b"".join(records))
    base = bytearray(b"".join(records))
    last = values[names[-1]].tobytes()
    after_values = base.index(last, starts[-1] - lo) + len(last)  # the metadata's tag
    for label, at in [
        ("header", starts[1] - lo + 3),
        ("footer", starts[2] - lo + lengths[2] - 2),
        ("wall time tag", starts[0] - lo + 12),
        ("step tag", starts[3] - lo + 21),
        ("learned bytes", starts[1] - lo + 30),
        ("after the values", after_values),
        ("metadata length", after_values + 1),
    ]:
        changed = bytearray(base)
        changed[at] ^= 0x01
        candidates[label] = bytes(changed)
    candidates["short"] = bytes(base[:-5])
    for label, data in candidates.items():
        expected = read(data, list(names))  # another keys object: no plan, the loop alone
        got = read(data, names)
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            assert (e is None and g is None) or (e is not None and g is not None and same(e, g)), (
                label,
                i,
            )
        if label == "next step":
            assert filled == [True]  # read by the plan, not the loop
            assert all(same(g, following[n]) for g, n in zip(got, names, strict=True))
            assert not any(g.flags.writeable for g in got)
            assert all(type(g) is np.ndarray for g in got)
        if label == "longer varint":
            assert all(g is None for g in got)  # the middle moved: no layout for that extent


def test_train_and_eval_files_both_keep_their_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of one list of tensors at two placements (an EVAL step's mode step has fewer
    digits than a TRAIN step's: shorter records) are each read by their own plan, in turn."""
    layouts = RecordLayouts()
    names = tuple(UNIFORM)

    def placed(step: int, mode_step: int) -> tuple[bytes, list[int], list[int]]:
        records = [record(UNIFORM[n] + step, tag=n, step=step, mode_step=mode_step) for n in names]
        return (b"".join(records), *_offsets(records, 0))

    for mode_step in (1000, 10):
        for n in names:
            learned = record(UNIFORM[n], tag=n, step=1, mode_step=mode_step)
            layouts.decode(learned, n, event_key="e", offset=0)
    filled = _spy_on_plans(monkeypatch)
    for step in range(2, 10):
        data, starts, lengths = placed(step, 1000 + step if step % 2 else 10 + step)
        out: list[Any] = [None] * len(names)
        layouts.fast_many(data, 0, names, starts, lengths, list(range(len(names))), out)
        assert all(same(o, UNIFORM[n] + step) for o, n in zip(out, names, strict=True))
    assert filled == [True] * 4  # the first two files of each placement made its plan


def test_a_tensor_whose_size_changes_stays_learned_at_each_size() -> None:
    """A tensor saved with a different length at different steps (an XGBoost tree's node
    ids, say: a dozen sizes, each at TRAIN and at EVAL mode steps of other digit counts) keeps
    a layout per record extent, so that once each is learned none goes the checked way."""
    layouts = RecordLayouts()

    def saved(size: int, mode_step: int) -> tuple[bytes, Any]:
        value = np.arange(size, dtype=np.int64)
        return record(value, tag="trees/Node", step=5, mode_step=mode_step), value

    cases = [saved(size, mode_step) for size in range(4, 16) for mode_step in (7, 1234)]
    for data, _ in cases:
        layouts.decode(data, "trees/Node", event_key="e", offset=0)
    for data, value in cases:
        got = layouts.fast(data, 0, len(data), "trees/Node")
        assert got is not None and same(got, value)


def test_the_plans_kept_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many places files come at, the bytes all kept plans check stay within
    ``_MAX_PLANNED_CHECKS`` (its count matches the plans kept), and every value is right."""
    import evaluator.formats.record_plans as record_plans

    monkeypatch.setattr(record_plans, "_MAX_PLANNED_CHECKS", 2000)
    layouts = RecordLayouts()
    names = tuple(UNIFORM)

    def kept() -> int:
        return sum(
            p.plan.size
            for places in layouts._plans.places.values()
            for p in places.by_key.values()
            if p.plan is not None
        )

    most = 0
    for size in range(8, 20):  # each size moves the records: a place of its own
        values = {n: np.arange(size, dtype=np.float32) + i for i, n in enumerate(names)}
        records = [record(values[n], tag=n, step=3, mode_step=7) for n in names]
        for r, n in zip(records, names, strict=True):
            layouts.decode(r, n, event_key="e", offset=0)
        starts, lengths = _offsets(records, 0)
        for _ in range(3):  # noted, planned, read by the plan
            out: list[Any] = [None] * len(names)
            layouts.fast_many(b"".join(records), 0, names, starts, lengths, list(range(6)), out)
            assert all(same(o, values[n]) for o, n in zip(out, names, strict=True))
            assert layouts._plans.planned_checks == kept() <= 2000
            most = max(most, kept())
    assert most > 1000  # plans were kept, up to the bound
