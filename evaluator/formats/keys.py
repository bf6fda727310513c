"""Key layout of a trial: where smdebug puts each file, and what a file's name says.

Keys are ``/``-separated and relative to the trial root (a local folder or an S3 prefix)::

    collections/000000000/<worker>_collections.json
    events/<STEP12>/<STEP12>_<worker>.tfevents          one folder per step
    index/<STEP // 1000 as 9 digits>/<STEP12>_<worker>.json
    training_job_end.ts

Zero padding makes lexical order step order, so "list only what is new" is a StartAfter.
Worker names that are TensorFlow device strings are serialized for file names
(``/job:worker/replica:0/task:1/device:GPU:6`` -> ``_job-worker_replica-0_task-1_device-GPU-6``).
"""

from __future__ import annotations

import posixpath
import re

from evaluator.errors import IndexReaderException, SMDebugValueError

__all__ = [
    "COLLECTIONS_PREFIX",
    "END_OF_JOB_KEY",
    "EVENTS_PREFIX",
    "INDEX_PREFIX",
    "REDUCTIONS_PREFIX",
    "collections_key",
    "deserialize_tf_device",
    "event_key",
    "index_key",
    "is_collections_key",
    "is_index_key",
    "parse_index_key",
    "parse_reduction_tensor_name",
    "reduction_tensor_name",
    "serialize_tf_device",
    "worker_from_collections_key",
]

INDEX_PREFIX = "index/"
EVENTS_PREFIX = "events/"
COLLECTIONS_PREFIX = "collections/000000000/"  # smdebug always uses collection step 0
END_OF_JOB_KEY = "training_job_end.ts"
REDUCTIONS_PREFIX = "smdebug/reductions/"

_STEPS_PER_INDEX_FOLDER = 1000

# The patterns smdebug applies (its unescaped dots included, so the same names pass).
_INDEX_BASENAME = re.compile(r"(.+)\.(json|csv)$")
_WORKER_IN_STEP_FILE = re.compile(r".+/\d+_(.+)\.(json|csv|tfevents)$")
_COLLECTIONS_BASENAME = re.compile(r".*_?collections.json$")
# smdebug's pattern starts with ".*/collections/"; "(?:.*/)?" also accepts our relative keys.
_WORKER_IN_COLLECTIONS = re.compile(r"(?:.*/)?collections/.+/(.+)_collections.(json|ts)")


def serialize_tf_device(device: str) -> str:
    """A worker name fit for a file name: ``/`` -> ``_`` and ``:`` -> ``-``."""
    return device.replace("/", "_").replace(":", "-")


def deserialize_tf_device(name: str) -> str:
    """The inverse of ``serialize_tf_device`` for device strings."""
    return name.replace("_", "/").replace("-", ":")


def event_key(step: int, worker: str) -> str:
    """``events/<STEP12>/<STEP12>_<worker>.tfevents``; also the index meta's event_file_name."""
    s = _step12(step)
    return f"{EVENTS_PREFIX}{s}/{s}_{serialize_tf_device(worker)}.tfevents"


def index_key(step: int, worker: str) -> str:
    """``index/<step // 1000 as 9 digits>/<STEP12>_<worker>.json``."""
    folder = format(step // _STEPS_PER_INDEX_FOLDER, "09")
    return f"{INDEX_PREFIX}{folder}/{_step12(step)}_{serialize_tf_device(worker)}.json"


def collections_key(worker: str) -> str:
    """``collections/000000000/<worker>_collections.json``."""
    return f"{COLLECTIONS_PREFIX}{serialize_tf_device(worker)}_collections.json"


def is_index_key(key: str) -> bool:
    """True for names smdebug reads as index files (``.json`` or ``.csv``; never ``.tmp``)."""
    return _INDEX_BASENAME.match(posixpath.basename(key)) is not None


def parse_index_key(key: str) -> tuple[int, str]:
    """(global step, worker) from an index (or event) file key.

    Unlike smdebug, which deserializes the worker whenever ``"__"`` appears anywhere in the path
    (so a trial folder named ``a__b`` turns ``worker_0`` into ``worker/0``), a worker is read as
    a TensorFlow device only when its serialized form starts with ``_``, as device strings do.
    """
    match = _WORKER_IN_STEP_FILE.match(key)
    step_text = posixpath.basename(key).split("_")[0]
    if match is None or not step_text.isdigit():
        raise IndexReaderException(f"Invalid File Found: {key}")
    return int(step_text), _worker_from_file_name(match.group(1))


def is_collections_key(key: str) -> bool:
    """True for names smdebug reads as collection files."""
    return _COLLECTIONS_BASENAME.match(posixpath.basename(key)) is not None


def worker_from_collections_key(key: str) -> str:
    """The worker a collections file belongs to, from its key."""
    match = _WORKER_IN_COLLECTIONS.match(key)
    if match is None:
        raise SMDebugValueError(
            f"not a collections file key: {key!r} "
            "(expected collections/<folder>/<worker>_collections.json)"
        )
    return _worker_from_file_name(match.group(1))


def reduction_tensor_name(tensor_name: str, reduction: str, *, abs: bool = False) -> str:
    """The name a saved reduction is stored under: ``smdebug/reductions/[abs_]<red>/<name>``.

    Norms are named ``l1``/``l2``. (Non-TF hooks strip ``:<digits>`` from the tensor name
    first; that is the writer's business, not this function's.)
    """
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{reduction}/{tensor_name}"


def parse_reduction_tensor_name(name: str) -> tuple[str, str, bool] | None:
    """(tensor name, reduction, abs) for a saved reduction's name, else None.

    smdebug's reading (``reverse_reduction_tensor_name``): the prefix may appear anywhere in the
    name (``tower_0/smdebug/reductions/max/x`` is ``x``'s max), the text after it runs to the next
    prefix if any, and ``abs_`` anywhere in the reduction part makes it an abs reduction. A name
    without ``/`` after the reduction (smdebug fails on it) is None.
    """
    at = name.find(REDUCTIONS_PREFIX)
    if at < 0:
        return None
    rest = name[at + len(REDUCTIONS_PREFIX) :].split(REDUCTIONS_PREFIX, 1)[0]
    reduction, sep, tensor_name = rest.partition("/")
    if not sep:
        return None
    if "abs_" in reduction:
        return tensor_name, reduction.split("abs_")[1], True
    return tensor_name, reduction, False


def _worker_from_file_name(name: str) -> str:
    return deserialize_tf_device(name) if name.startswith("_") else name


def _step12(step: int) -> str:
    if step < 0:
        raise ValueError(f"steps are >= 0, got {step}")
    return format(step, "012")
