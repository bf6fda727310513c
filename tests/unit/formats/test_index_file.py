"""Index JSON: smdebug's exceptions and messages, and byte-exact serialization."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evaluator.errors import IndexReaderException
from evaluator.formats.index_file import (
    IndexFile,
    IndexMeta,
    ShapeEntry,
    TensorEntry,
    parse_index_file,
    serialize_index_file,
)
from evaluator.modes import ModeKeys
from tests.unit.formats.fixture_files import INDEX_FILES, file_id

EVENT_FILE = "events/000000000007/000000000007_worker_0.tfevents"
SPEC_EXAMPLE = (
    '{"meta": {"mode": "EVAL", "mode_step": 3, "event_file_name": "' + EVENT_FILE + '"}, '
    '"tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 88}, '
    '{"tensorname": "s", "start_idx": 88, "length": 83}], "shape_payload": []}'
)
SHAPE_ONLY = (
    '{"meta": {"mode": "TRAIN", "mode_step": 617}, "tensor_payload": [], "shape_payload": '
    '[{"tensorname": "conv1.weight", "originalname": "conv1.weight", "shape": [20, 1, 5, 5]}, '
    '{"tensorname": "fc.bias", "originalname": "fc/bias:0", "shape": []}]}'
)


def test_parse_spec_example() -> None:
    """The spec's example parses into meta and byte-range entries."""
    index = parse_index_file(SPEC_EXAMPLE)
    assert index.meta == IndexMeta(ModeKeys.EVAL, 3, EVENT_FILE)
    assert index.tensors == (TensorEntry("w", 0, 88), TensorEntry("s", 88, 83))
    assert index.shapes == ()


def test_parse_shape_only_file() -> None:
    """A shape-only file has no event_file_name and keeps original names and shapes."""
    index = parse_index_file(SHAPE_ONLY.encode())
    assert index.meta == IndexMeta(ModeKeys.TRAIN, 617, None)
    assert index.shapes == (
        ShapeEntry("conv1.weight", "conv1.weight", (20, 1, 5, 5)),
        ShapeEntry("fc.bias", "fc/bias:0", ()),
    )


@pytest.mark.parametrize("text", [SPEC_EXAMPLE, SHAPE_ONLY])
def test_serialize_matches_smdebug_layout(text: str) -> None:
    """Serializing gives json.dumps's layout in smdebug's key order, byte for byte."""
    assert serialize_index_file(parse_index_file(text)) == text.encode()


@pytest.mark.parametrize("path", INDEX_FILES, ids=file_id)
def test_every_fixture_index_file_round_trips_byte_exact(path: Path) -> None:
    """Parsing then serializing each smdebug-written index file gives the same bytes."""
    data = path.read_bytes()
    assert serialize_index_file(parse_index_file(data)) == data


def test_mode_name_is_stripped() -> None:
    """Like smdebug, the mode name may carry surrounding whitespace."""
    text = '{"meta": {"mode": " TRAIN ", "mode_step": "5"}, "shape_payload": []}'
    assert parse_index_file(text).meta == IndexMeta(ModeKeys.TRAIN, 5, None)


def test_missing_payload_section_reads_as_empty() -> None:
    """One payload section is enough; the other reads as empty."""
    text = '{"meta": {"mode": "GLOBAL", "mode_step": 1}, "shape_payload": []}'
    assert parse_index_file(text) == IndexFile(IndexMeta(ModeKeys.GLOBAL, 1, None))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Empty/Corrupt Index File"),
        ("{not json", "Empty/Corrupt Index File"),
        (b"\xff\xfe\x00", "Empty/Corrupt Index File"),
        ("[1, 2]", "Empty/Corrupt Index File"),
        ('{"tensor_payload": []}', "meta section is not present"),
        ('{"meta": {}, "tensor_payload": []}', "meta section is empty"),
        (
            '{"meta": {"mode": "TRAIN", "mode_step": 0}}',
            "neither tensor_payload nor shape_payload sections are present",
        ),
    ],
)
def test_smdebug_messages(text: str | bytes, message: str) -> None:
    """The cases smdebug checks raise IndexReaderException with smdebug's exact message."""
    with pytest.raises(IndexReaderException) as info:
        parse_index_file(text)
    assert str(info.value) == message


def meta_json(**meta: object) -> str:
    return json.dumps({"meta": meta, "tensor_payload": [], "shape_payload": []})


def payload_json(tensors: object = (), shapes: object = ()) -> str:
    meta = {"mode": "TRAIN", "mode_step": 0, "event_file_name": EVENT_FILE}
    return json.dumps({"meta": meta, "tensor_payload": tensors, "shape_payload": shapes})


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (meta_json(mode="TRAINING", mode_step=0), "TRAINING"),
        (meta_json(mode=1, mode_step=0), "mode"),
        (meta_json(mode_step=0), "mode"),
        (meta_json(mode="TRAIN"), "mode_step"),
        (meta_json(mode="TRAIN", mode_step="x"), "mode_step"),
        (meta_json(mode="TRAIN", mode_step=True), "mode_step"),
        (meta_json(mode="TRAIN", mode_step=1.5), "mode_step"),
        (meta_json(mode="TRAIN", mode_step=0, event_file_name=3), "event_file_name"),
        ('{"meta": 5, "shape_payload": []}', "meta"),
        (payload_json(tensors={"a": 1}), "tensor_payload"),
        (payload_json(tensors=[{"tensorname": "a", "start_idx": 0}]), "length"),
        (payload_json(tensors=[{"start_idx": 0, "length": 4}]), "tensorname"),
        (payload_json(tensors=[{"tensorname": "a", "start_idx": "x", "length": 4}]), "start_idx"),
        (payload_json(tensors=["a"]), "tensor_payload entry"),
        (payload_json(shapes=[{"tensorname": "a", "originalname": "a"}]), "shape"),
        (payload_json(shapes=[{"tensorname": "a", "shape": [1, "b"]}]), "shape"),
        (payload_json(shapes=[{"tensorname": "a", "originalname": 1, "shape": []}]), "original"),
    ],
)
def test_other_malformations_name_the_field(text: str, names: str) -> None:
    """Malformations smdebug trips over obscurely raise IndexReaderException naming the field."""
    with pytest.raises(IndexReaderException, match=names):
        parse_index_file(text)


def test_tensors_without_event_file_name_are_refused() -> None:
    """A file listing tensors must say which event file holds them."""
    meta = {"mode": "TRAIN", "mode_step": 0}
    entry = {"tensorname": "a", "start_idx": 0, "length": 20}
    text = json.dumps({"meta": meta, "tensor_payload": [entry]})
    with pytest.raises(IndexReaderException, match="event_file_name"):
        parse_index_file(text)


def test_missing_originalname_is_none() -> None:
    """A shape entry without originalname parses with None."""
    index = parse_index_file(payload_json(shapes=[{"tensorname": "a", "shape": [2]}]))
    assert index.shapes == (ShapeEntry("a", None, (2,)),)


def test_records_are_frozen() -> None:
    """Parsed records are immutable."""
    index = parse_index_file(SPEC_EXAMPLE)
    with pytest.raises(AttributeError):
        index.meta.mode_step = 4  # type: ignore[misc]


def test_more_entries_than_the_limit_are_refused_naming_file_and_limit() -> None:
    """An index file listing more tensor and shape entries than ``max_entries`` is refused as
    bad data, the error naming the file and the limit."""
    document = json.loads(SPEC_EXAMPLE)
    document["shape_payload"] = json.loads(SHAPE_ONLY)["shape_payload"]
    with pytest.raises(IndexReaderException, match=r"index/x\.json lists 4 entries.*limit of 3"):
        parse_index_file(json.dumps(document), max_entries=3, source="index/x.json")
    assert len(parse_index_file(SPEC_EXAMPLE, max_entries=2).tensors) == 2


def test_a_file_over_the_byte_limit_is_refused_before_parsing() -> None:
    """An index file larger than ``max_bytes`` is refused without being parsed."""
    with pytest.raises(IndexReaderException, match=r"index/x\.json is \d+ bytes.*limit of 100"):
        parse_index_file(b"{" * 101, max_bytes=100, source="index/x.json")


def test_columns_hold_the_entries_parse_index_file_gives() -> None:
    """parse_index_columns: the same meta, entries and shapes as parse_index_file, and the
    same error for an irregular entry."""
    from evaluator.formats.index_file import parse_index_columns

    data = (
        b'{"meta": {"mode": "EVAL", "mode_step": 3, "event_file_name": "events/e"},'
        b' "tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 88},'
        b' {"tensorname": "b", "start_idx": 88, "length": 90}],'
        b' "shape_payload": [{"tensorname": "s", "originalname": "s:0", "shape": [2]}]}'
    )
    whole, columns = parse_index_file(data), parse_index_columns(data)
    assert (columns.meta, columns.tensors, columns.shapes) == (
        whole.meta,
        whole.tensors,
        whole.shapes,
    )
    bad = data.replace(b'"length": 90', b'"length": "x"')
    with pytest.raises(IndexReaderException) as a:
        parse_index_file(bad)
    with pytest.raises(IndexReaderException) as b:
        parse_index_columns(bad)
    assert str(a.value) == str(b.value)


def _outcome(parse: Callable[[bytes], Any], data: bytes) -> object:
    """What parsing ``data`` gives: the parsed fields, or the error's type and message."""
    try:
        got = parse(data)
    except IndexReaderException as e:
        return ("error", str(e))
    return (got.meta, got.tensors, got.shapes)


def _index_bytes(mode_step: int, payload: str = "", head: str | None = None) -> bytes:
    meta = head or (
        f'{{"mode": "TRAIN", "mode_step": {mode_step}, '
        f'"event_file_name": "events/{mode_step:012d}/{mode_step:012d}_worker_0.tfevents"}}'
    )
    payload = payload or (
        '"tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 88}, '
        '{"tensorname": "b", "start_idx": 88, "length": 90}], '
        '"shape_payload": [{"tensorname": "w", "originalname": "w:0", "shape": [2, 11]}]'
    )
    return f'{{"meta": {meta}, {payload}}}'.encode()


def test_index_parser_shares_a_repeated_payload_and_reads_each_meta() -> None:
    """Steps whose payload bytes repeat get the columns parsed once (the same lists) and their
    own meta: the answers of a full parse of each file."""
    from evaluator.formats.index_file import IndexParser, parse_index_columns

    parser = IndexParser()
    files = [_index_bytes(step) for step in range(5)]
    parsed = [parser.parse(data) for data in files]
    for data, got in zip(files, parsed, strict=True):
        whole = parse_index_columns(data)
        assert (got.meta, got.tensors, got.shapes) == (whole.meta, whole.tensors, whole.shapes)
    assert [p.meta.mode_step for p in parsed] == [0, 1, 2, 3, 4]
    assert all(p.names is parsed[0].names and p.starts is parsed[0].starts for p in parsed)


@pytest.mark.parametrize(
    "second",
    [
        # the meta spells "tensor_payload" (a key inside it, a string value)
        _index_bytes(
            1,
            head='{"mode": "TRAIN", "mode_step": 1, "tensor_payload": 2, '
            '"event_file_name": "events/e"}',
        ),
        _index_bytes(
            1, head='{"mode": "TRAIN", "mode_step": 1, "event_file_name": "tensor_payload"}'
        ),
        # the meta is empty, not an object, lacks fields, or has a bad mode
        _index_bytes(1, head="{}"),
        _index_bytes(1, head="[1, 2]"),
        _index_bytes(1, head='{"mode": "TRAIN", "mode_step": 1}'),
        _index_bytes(1, head='{"mode": "TRAINING", "mode_step": 1, "event_file_name": "e"}'),
        _index_bytes(1, head='{"mode": "TRAIN", "mode_step": "x", "event_file_name": "e"}'),
        # two values where the meta should be one; a meta left open
        _index_bytes(1, head='{"mode": "TRAIN"}, "x": {"y": 1}'),
        b'{"meta": {"mode": "TRAIN", ' + _index_bytes(0)[len(b'{"meta": {') :],
        # other spacing, another key order, a payload with a second "meta"
        _index_bytes(0).replace(b'{"meta": ', b'{ "meta" :\n'),
        b'{"tensor_payload": [], ' + _index_bytes(1)[1:],
        _index_bytes(1)[:-1] + b', "meta": {"mode": "EVAL", "mode_step": 9, '
        b'"event_file_name": "events/x"}}',
        # not JSON at all past the head
        _index_bytes(1)[:-1],
    ],
)
def test_index_parser_answers_as_a_full_parse_on_odd_files(second: bytes) -> None:
    """Whatever follows a file whose payload was kept, the parser gives what a full parse
    gives: the same fields, or the same error."""
    from evaluator.formats.index_file import IndexParser, parse_index_columns

    parser = IndexParser()
    parser.parse(_index_bytes(0))
    assert _outcome(parser.parse, second) == _outcome(parse_index_columns, second)
    # and a regular file after it still parses right
    after = _index_bytes(2)
    assert _outcome(parser.parse, after) == _outcome(parse_index_columns, after)


def test_index_parser_applies_the_byte_limit_to_a_repeated_payload() -> None:
    """The size limit holds for a file whose payload is known: a longer meta over the limit is
    refused with the limit's message."""
    from evaluator.formats.index_file import IndexParser

    parser = IndexParser()
    first = _index_bytes(0)
    parser.parse(first, max_bytes=len(first))
    long_meta = _index_bytes(
        1, head='{"mode": "TRAIN", "mode_step": 1, "event_file_name": "' + "e" * 100 + '"}'
    )
    with pytest.raises(IndexReaderException, match="over the limit"):
        parser.parse(long_meta, max_bytes=len(first), source="index/x.json")


@pytest.mark.parametrize(
    "payload",
    [
        # a second "meta" key after the sections: the later one is the file's meta
        '"tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 88}], '
        '"meta": {"mode": "EVAL", "mode_step": 9, "event_file_name": "events/x"}',
        # a tensor named "meta"
        '"tensor_payload": [{"tensorname": "meta", "start_idx": 0, "length": 88}]',
        # shapes only
        '"shape_payload": [{"tensorname": "w", "originalname": "w:0", "shape": [3]}]',
    ],
)
def test_index_parser_gives_each_file_its_own_meta(payload: str) -> None:
    """Files that repeat a payload, each with its own head: every one parses as alone."""
    from evaluator.formats.index_file import IndexParser, parse_index_columns

    parser = IndexParser()
    for step in range(3):
        data = _index_bytes(step, payload)
        assert _outcome(parser.parse, data) == _outcome(parse_index_columns, data)


def test_index_parser_keeps_no_payload_over_its_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload over the bound is parsed in full at every file, not held (a trial of huge
    index files costs no more memory than it did)."""
    import evaluator.formats.index_file as index_file

    files = [_index_bytes(step) for step in range(3)]
    payload = len(files[0]) - files[0].find(b'"tensor_payload"')
    for bound, shared in ((payload, True), (payload - 1, False)):
        monkeypatch.setattr(index_file, "_MAX_KEPT_PAYLOAD", bound)
        parser = index_file.IndexParser()
        first, *rest = (parser.parse(data) for data in files)
        assert all((p.names is first.names) is shared for p in rest), bound
        assert [p.meta.mode_step for p in (first, *rest)] == [0, 1, 2]


def test_index_parser_keeps_the_payloads_used_most_recently() -> None:
    """A payload met again moves to the front of those kept: one that recurs among many others
    (the steps of one length of a tensor whose size changes) stays parsed once."""
    from evaluator.formats.index_file import IndexParser

    def payload(k: int) -> str:
        return f'"tensor_payload": [{{"tensorname": "w", "start_idx": 0, "length": {80 + k}}}]'

    parser = IndexParser()
    first = parser.parse(_index_bytes(0, payload(0)))
    step = 1
    for others in (range(1, 16), range(16, 31)):
        for k in others:
            parser.parse(_index_bytes(step, payload(k)))
            step += 1
        again = parser.parse(_index_bytes(step, payload(0)))
        step += 1
        assert again.names is first.names and again.meta.mode_step == step - 1
