"""Index files: one JSON object per (step, worker) saying where each tensor's record is.

::

    {"meta": {"mode": "EVAL", "mode_step": 3, "event_file_name": "events/.../....tfevents"},
     "tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 88}],
     "shape_payload": [{"tensorname": "b", "originalname": "b:0", "shape": [4]}]}

``meta`` holds the mode and mode step of the whole file; ``event_file_name`` is absent when the
file lists only shapes. Byte ranges cover whole framed records. Parsing raises smdebug's
``IndexReaderException`` with smdebug's messages for the cases smdebug checks, and with a
message naming the field for the malformations smdebug would trip over with a bare error.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from evaluator.errors import IndexReaderException
from evaluator.modes import ModeKeys

__all__ = [
    "IndexColumns",
    "IndexFile",
    "IndexMeta",
    "IndexParser",
    "ShapeEntry",
    "TensorEntry",
    "parse_index_columns",
    "parse_index_file",
    "serialize_index_file",
]


@dataclass(frozen=True, slots=True)
class IndexMeta:
    """Mode and mode step of every entry of the file, and the event file its ranges point into."""

    mode: ModeKeys
    mode_step: int
    event_file_name: str | None


class TensorEntry(NamedTuple):
    """A tensor value: bytes ``[start_idx, start_idx + length)`` of the event file.

    A NamedTuple rather than a frozen dataclass: a large trial has hundreds of thousands of
    entries, and building a tuple costs a fraction of a frozen dataclass's ``__init__``.
    """

    tensorname: str
    start_idx: int
    length: int


class ShapeEntry(NamedTuple):
    """A saved shape (no value). ``originalname`` is the framework's name, e.g. ``fc/bias:0``."""

    tensorname: str
    originalname: str | None
    shape: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IndexFile:
    meta: IndexMeta
    tensors: tuple[TensorEntry, ...] = ()
    shapes: tuple[ShapeEntry, ...] = ()


def parse_index_file(
    data: bytes | str,
    *,
    max_entries: int | None = None,
    max_bytes: int | None = None,
    source: str = "index file",
) -> IndexFile:
    """Parse an index file's content.

    Bad data that would cost unbounded memory is refused, naming ``source`` and the limit:
    more than ``max_bytes`` bytes (before parsing), more than ``max_entries`` tensor and shape
    entries together (before any entry is built)."""
    raw_meta, tensor_list, shape_list = _document(data, max_entries, max_bytes, source)
    tensors = _tensor_entries(tensor_list)
    shapes = tuple(_shape_entry(e) for e in shape_list)
    meta = _meta(raw_meta)
    if tensors and meta.event_file_name is None:
        raise IndexReaderException("index file lists tensors but its meta has no event_file_name")
    return IndexFile(meta, tensors, shapes)


class IndexColumns(NamedTuple):
    """An index file as ``parse_index_columns`` gives it: the tensor entries as three
    columns (no object per entry), for a reader that keeps them compact."""

    meta: IndexMeta
    names: list[str]
    starts: list[int]
    lengths: list[int]
    shapes: tuple[ShapeEntry, ...]

    @property
    def tensors(self) -> tuple[TensorEntry, ...]:
        """The entries as ``parse_index_file`` gives them."""
        return tuple(map(TensorEntry, self.names, self.starts, self.lengths))


def parse_index_columns(
    data: bytes | str,
    *,
    max_entries: int | None = None,
    max_bytes: int | None = None,
    source: str = "index file",
) -> IndexColumns:
    """``parse_index_file``, the same checks and errors, with the tensor entries as columns."""
    raw_meta, tensor_list, shape_list = _document(data, max_entries, max_bytes, source)
    try:
        names = list(map(_NAME_FIELD, tensor_list))
        starts = list(map(_START_FIELD, tensor_list))
        lengths = list(map(_LENGTH_FIELD, tensor_list))
    except (KeyError, TypeError, IndexError):
        names = []
    if not (names and _all_of(names, str) and _all_of(starts + lengths, int)):
        # Any irregularity: the entry-by-entry checks say what is wrong.
        entries = tuple(_checked_tensor_entry(e) for e in tensor_list)
        names = [t.tensorname for t in entries]
        starts = [t.start_idx for t in entries]
        lengths = [t.length for t in entries]
    shapes = tuple(_shape_entry(e) for e in shape_list)
    meta = _meta(raw_meta)
    columns = IndexColumns(meta, names, starts, lengths, shapes)
    if columns.names and meta.event_file_name is None:
        raise IndexReaderException("index file lists tensors but its meta has no event_file_name")
    return columns


class IndexParser:
    """``parse_index_columns`` for the index files of one trial, read one after the other.

    The steps of a job list the same tensors at the same offsets, step after step: only the
    meta (mode step, event file) differs. The parser keeps the payload bytes (everything after
    the meta) of the 16 payloads used most recently, with their parsed columns (a tensor whose
    size changes moves the offsets after it, so a job can have dozens); a file whose payload
    bytes are equal to one of them has only its meta parsed and shares those columns
    (read-only). Equal bytes parse to equal entries, so the answers and the errors are those
    of a full parse: anything unusual (another layout of the JSON, a payload naming ``meta``,
    a meta that does not parse on its own) takes the full parse.
    """

    def __init__(self, keep: int = 16) -> None:
        self._recent: list[tuple[bytes, IndexColumns]] = []
        self._keep = keep

    def parse(
        self,
        data: bytes,
        *,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        source: str = "index file",
    ) -> IndexColumns:
        cut = _payload_start(data)
        payload = data[cut:] if cut > 0 else b""
        if payload and (max_bytes is None or len(data) <= max_bytes):
            for k, (seen, columns) in enumerate(self._recent):
                if seen == payload:
                    meta = _meta_alone(data[:cut])
                    if meta is not None and (meta.event_file_name is not None or not columns.names):
                        if k:  # the most recently used first
                            self._recent.insert(0, self._recent.pop(k))
                        return IndexColumns(
                            meta, columns.names, columns.starts, columns.lengths, columns.shapes
                        )
                    break
        columns = parse_index_columns(
            data, max_entries=max_entries, max_bytes=max_bytes, source=source
        )
        # Kept only when the split is known to be the document's: the meta read alone is the
        # one the full parse found, and the payload cannot hold a second "meta" key; and only
        # up to a size (what the parser holds stays small next to the trial's state).
        if (
            payload
            and len(payload) <= _MAX_KEPT_PAYLOAD
            and b'"meta"' not in payload
            and _meta_alone(data[:cut]) == columns.meta
        ):
            self._recent.insert(0, (payload, columns))
            del self._recent[self._keep :]
        return columns


_MAX_KEPT_PAYLOAD = 1 << 20  # bytes (an index file of 10,000 tensors is about 800 KiB)

# The head of an index file before its payload: ``{"meta": <one JSON value>, `` (any spacing).
_HEAD = re.compile(rb'\{\s*"meta"\s*:(.*),\s*', re.DOTALL)


def _payload_start(data: bytes) -> int:
    """Where the sections after the meta begin (-1 when neither is found)."""
    cut = data.find(b'"tensor_payload"')
    return cut if cut >= 0 else data.find(b'"shape_payload"')


def _meta_alone(head: bytes) -> IndexMeta | None:
    """The meta of ``head`` (an index file up to its payload), or None when the head is not
    exactly ``{"meta": <value>,`` with a valid, non-empty meta: then a full parse decides."""
    found = _HEAD.fullmatch(head)
    if found is None:
        return None
    try:
        raw = orjson.loads(found.group(1))
        return _meta(raw) if raw and isinstance(raw, dict) else None
    except (ValueError, IndexReaderException):
        return None


def _all_of(values: list[Any], kind: type) -> bool:
    return set(map(type, values)) == {kind}


def _document(
    data: bytes | str, max_entries: int | None, max_bytes: int | None, source: str
) -> tuple[Any, list[Any], list[Any]]:
    """The meta, the tensor entries and the shape entries of an index file, as parsed; the
    sections are checked to be there, within the entry limit."""
    if max_bytes is not None and len(data) > max_bytes:
        raise IndexReaderException(
            f"{source} is {len(data)} bytes, over the limit of {max_bytes} (max_index_file_mb)"
        )
    try:
        document = orjson.loads(data)  # about twice as fast as json on index files
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        raise IndexReaderException("Empty/Corrupt Index File") from None
    if not isinstance(document, dict):
        raise IndexReaderException("Empty/Corrupt Index File")
    if "meta" not in document:
        raise IndexReaderException("meta section is not present")
    meta = document["meta"]
    if not meta:
        raise IndexReaderException("meta section is empty")
    if "tensor_payload" not in document and "shape_payload" not in document:
        raise IndexReaderException("neither tensor_payload nor shape_payload sections are present")
    tensor_list = _entries(document, "tensor_payload")
    shape_list = _entries(document, "shape_payload")
    count = len(tensor_list) + len(shape_list)
    if max_entries is not None and count > max_entries:
        raise IndexReaderException(
            f"{source} lists {count} entries, over the limit of {max_entries} "
            "(max_index_entries): refused as bad data"
        )
    return meta, tensor_list, shape_list


def serialize_index_file(index: IndexFile) -> bytes:
    """The bytes smdebug's index writer produces for ``index`` (``json.dumps`` layout)."""
    meta: dict[str, Any] = {"mode": index.meta.mode.name, "mode_step": index.meta.mode_step}
    if index.meta.event_file_name is not None:
        meta["event_file_name"] = index.meta.event_file_name
    document = {
        "meta": meta,
        "tensor_payload": [
            {"tensorname": t.tensorname, "start_idx": t.start_idx, "length": t.length}
            for t in index.tensors
        ],
        "shape_payload": [
            {"tensorname": s.tensorname, "originalname": s.originalname, "shape": list(s.shape)}
            for s in index.shapes
        ],
    }
    return json.dumps(document).encode("utf-8")


def _meta(meta: object) -> IndexMeta:
    if not isinstance(meta, Mapping):
        raise IndexReaderException(f"index meta must be an object, got {type(meta).__name__}")
    mode = _field(meta, "mode", "meta")
    if not isinstance(mode, str):
        raise IndexReaderException(f"index meta 'mode' must be a mode name, got {mode!r}")
    try:
        parsed_mode = ModeKeys[mode.strip()]
    except KeyError:
        names = ", ".join(m.name for m in ModeKeys)
        raise IndexReaderException(f"index meta has unknown mode {mode!r} ({names})") from None
    mode_step = _int(_field(meta, "mode_step", "meta"), "meta", "mode_step")
    event_file_name = meta.get("event_file_name")
    if event_file_name is not None and not isinstance(event_file_name, str):
        raise IndexReaderException(
            f"index meta 'event_file_name' must be a string, got {event_file_name!r}"
        )
    return IndexMeta(parsed_mode, mode_step, event_file_name)


def _entries(document: Mapping[str, Any], section: str) -> list[Any]:
    entries = document.get(section, [])
    if not isinstance(entries, list):
        raise IndexReaderException(f"index {section} must be a list, got {type(entries).__name__}")
    return entries


_TENSOR_FIELDS = operator.itemgetter("tensorname", "start_idx", "length")
_NAME_FIELD = operator.itemgetter("tensorname")
_START_FIELD = operator.itemgetter("start_idx")
_LENGTH_FIELD = operator.itemgetter("length")
_make_tensor_entry = functools.partial(tuple.__new__, TensorEntry)


def _tensor_entries(entries: list[Any]) -> tuple[TensorEntry, ...]:
    # Large trials have hundreds of thousands of entries: well-formed ones are taken apart and
    # type-checked with C-level bulk operations; any irregularity goes to the entry-by-entry
    # checks, whose messages name what is wrong.
    try:
        rows = list(map(_TENSOR_FIELDS, entries))
    except (KeyError, TypeError, IndexError):
        rows = None
    if rows:
        names, starts, lengths = zip(*rows)
        if (
            set(map(type, names)) == {str}
            and set(map(type, starts)) == {int}
            and set(map(type, lengths)) == {int}
        ):
            return tuple(map(_make_tensor_entry, rows))
    return tuple(_checked_tensor_entry(e) for e in entries)


def _checked_tensor_entry(entry: object) -> TensorEntry:
    where = "tensor_payload entry"
    if not isinstance(entry, Mapping):
        raise IndexReaderException(f"{where} must be an object, got {entry!r}")
    return TensorEntry(
        tensorname=_name(entry, "tensorname", where),
        start_idx=_int(_field(entry, "start_idx", where), where, "start_idx"),
        length=_int(_field(entry, "length", where), where, "length"),
    )


def _shape_entry(entry: object) -> ShapeEntry:
    where = "shape_payload entry"
    if not isinstance(entry, Mapping):
        raise IndexReaderException(f"{where} must be an object, got {entry!r}")
    shape = _field(entry, "shape", where)
    if not isinstance(shape, list):
        raise IndexReaderException(f"{where} 'shape' must be a list, got {shape!r}")
    original = entry.get("originalname")
    if original is not None and not isinstance(original, str):
        raise IndexReaderException(f"{where} 'originalname' must be a string, got {original!r}")
    return ShapeEntry(
        tensorname=_name(entry, "tensorname", where),
        originalname=original,
        shape=tuple(_int(d, where, "shape") for d in shape),
    )


def _field(mapping: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return mapping[key]
    except KeyError:
        raise IndexReaderException(f"index {where} has no {key!r}") from None


def _name(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = _field(entry, key, where)
    if not isinstance(value, str):
        raise IndexReaderException(f"index {where} {key!r} must be a string, got {value!r}")
    return value


def _int(value: object, where: str, key: str) -> int:
    # smdebug applies int(), so "3" is accepted; booleans and fractions are not integers here.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise IndexReaderException(f"index {where} {key!r} must be an integer, got {value!r}")
