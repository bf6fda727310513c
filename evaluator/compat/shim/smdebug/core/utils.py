"""smdebug.core.utils: the helpers analysis code and tests import from it.

Only the reading side (paths, worker names, regex matching, step ranges): the hook-side helpers
(framework detection, SageMaker environment, telemetry) are not provided.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from evaluator.errors import IndexReaderException, SMDebugTypeError, SMDebugValueError
from evaluator.formats.keys import (
    deserialize_tf_device,
    parse_index_key,
    serialize_tf_device,
    worker_from_collections_key,
)
from evaluator.storage.s3_scheme import S3_SCHEME
from evaluator.storage.schemes import scheme_of, split_remote

from .logger import get_logger

__all__ = [
    "deserialize_tf_device",
    "ensure_dir",
    "flatten",
    "get_logger",
    "get_path_to_collections",
    "get_path_to_events_directory",
    "get_worker_name_from_collection_file",
    "index",
    "is_s3",
    "list_collection_files_in_directory",
    "list_files_in_directory",
    "load_json_as_dict",
    "make_numpy_array",
    "match_inc",
    "merge_two_dicts",
    "parse_worker_name_from_file",
    "serialize_tf_device",
    "size_and_shape",
    "split",
    "step_in_range",
]


def is_s3(path: str) -> tuple[bool, str | None, str | None]:
    """``(True, bucket, prefix)`` for ``s3://bucket/prefix`` (prefix ``""`` for a bare
    bucket), ``(False, None, None)`` for anything else."""
    scheme = scheme_of(path)
    if scheme is None or scheme.prefix != S3_SCHEME.prefix:
        return False, None, None  # a folder, or another registered scheme: not S3
    bucket, prefix = split_remote(path)
    return True, bucket, prefix


def flatten(items: Iterable[Any]) -> list[Any]:
    """Nested lists made flat (other sequences are kept whole, as smdebug does)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out


def split(comma_separated: str) -> list[str]:
    """``"a, b ,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in comma_separated.split(",")]


def merge_two_dicts(x: dict[Any, Any], y: dict[Any, Any]) -> dict[Any, Any]:
    """A new dict of both; ``y`` wins on a shared key."""
    return {**x, **y}


def match_inc(tname: str, include: Iterable[str]) -> bool:
    """Whether any regex of ``include`` is found anywhere in ``tname``."""
    return any(re.search(pattern, tname) for pattern in include)


def index(sorted_list: Sequence[Any], elem: Any) -> int:
    """The position of ``elem`` in ``sorted_list``; SMDebugValueError when absent."""
    at = bisect.bisect_left(sorted_list, elem)
    if at < len(sorted_list) and sorted_list[at] == elem:
        return at
    raise SMDebugValueError(f"Could not find {elem} in the list")


def step_in_range(range_steps: tuple[int | None, int | None], step: int) -> bool:
    """Whether ``step`` lies in ``[begin, end)``; None is unbounded."""
    begin, end = range_steps
    return (begin is None or int(step) >= int(begin)) and (end is None or int(step) < int(end))


def get_path_to_collections(directory: str) -> str:
    """``<directory>/collections/000000000/``, with the trailing slash."""
    return os.path.join(directory, "collections", "000000000", "")


def get_path_to_events_directory(path: str) -> str:
    """``<path>/events/``, with the trailing slash."""
    return os.path.join(path, "events", "")


def get_worker_name_from_collection_file(filename: str) -> str:
    """The worker a collections file belongs to (``…/worker_0_collections.json``)."""
    return worker_from_collections_key(filename)


def parse_worker_name_from_file(filename: str) -> str:
    """The worker of an index or event file (``…/000000000012_worker_0.json``);
    ``IndexReaderException`` for any other name."""
    if re.match(r".+/\d+_(.+)\.(json|csv|tfevents)$", filename) is None:
        raise IndexReaderException(f"Invalid File Found: {filename}")
    return parse_index_key(filename)[1]


def list_files_in_directory(directory: str, file_regex: str | None = None) -> list[str]:
    """Paths of the files under ``directory`` (recursively) whose names match ``file_regex``
    from their start; unsorted, as ``os.walk`` gives them."""
    found = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if file_regex is None or re.match(file_regex, name):
                found.append(os.path.join(root, name))
    return found


def list_collection_files_in_directory(directory: str) -> list[str]:
    """The collections files (``*collections.json``) under ``directory``."""
    return list_files_in_directory(directory, file_regex=r".*_?collections.json$")


def load_json_as_dict(s: Any) -> dict[str, Any] | None:
    """A JSON string parsed, a dict as it is, None (or ``"None"``) as None; anything else is
    an ``SMDebugValueError``."""
    if s is None or s == "None":
        return None
    if isinstance(s, str):
        return json.loads(s)
    if isinstance(s, dict):
        return s
    raise SMDebugValueError("parameter must be either str or dict")


def ensure_dir(file_path: str, is_file: bool = True) -> None:
    """Create the folder of ``file_path`` (or ``file_path`` itself when ``is_file`` is false)."""
    directory = os.path.dirname(file_path) if is_file else file_path
    if directory:
        os.makedirs(directory, exist_ok=True)


def size_and_shape(t: Any) -> tuple[int, Any]:
    """``(bytes, shape)`` of an array; ``(len, [len])`` of a string or bytes."""
    if isinstance(t, (bytes, str)):
        return len(t), [len(t)]
    return t.nbytes, t.shape


def make_numpy_array(x: Any) -> np.ndarray:
    """``x`` as a numpy array: arrays as they are, scalars as 1-element arrays, tuples and
    lists converted."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, (tuple, list)):
        return np.asarray(x)
    if isinstance(x, dict):
        return np.array(x)
    raise SMDebugTypeError(f"_make_numpy_array does not support the type {type(x)}")
