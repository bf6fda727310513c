"""The on-disk formats as pure functions: bytes in, records out, no I/O.

=====================  ======================================================================
``keys``               where each file of a trial lives, and what its name says
``crc``, ``tfrecord``  record framing of event files (masked CRC32C, smdebug's footer)
``tensor_codec``       ``TensorProto`` <-> ``numpy.ndarray``
``events``             tensor ``Event`` records (``decode_tensor_value`` is the hot path)
``index_file``         per-step index JSON: tensor byte ranges and shapes
``collections_file``   per-worker collections JSON
``trainer_state``      a Hugging Face Trainer's ``trainer_state.json``, as its TensorBoard scalars
=====================  ======================================================================
"""

from evaluator.formats.collections_file import (
    Collection,
    CollectionsFile,
    ReductionConfig,
    SaveConfigMode,
    parse_collections_file,
    serialize_collections_file,
)
from evaluator.formats.crc import FOOTER_MAGIC, masked_crc32c
from evaluator.formats.events import (
    TensorEvent,
    decode_record_value,
    decode_tensor_event,
    decode_tensor_value,
    encode_tensor_event,
)
from evaluator.formats.index_file import (
    IndexFile,
    IndexMeta,
    ShapeEntry,
    TensorEntry,
    parse_index_file,
    serialize_index_file,
)
from evaluator.formats.keys import (
    COLLECTIONS_PREFIX,
    END_OF_JOB_KEY,
    EVENTS_PREFIX,
    INDEX_PREFIX,
    REDUCTIONS_PREFIX,
    collections_key,
    deserialize_tf_device,
    event_key,
    index_key,
    is_collections_key,
    is_index_key,
    parse_index_key,
    parse_reduction_tensor_name,
    reduction_tensor_name,
    serialize_tf_device,
    worker_from_collections_key,
)
from evaluator.formats.tensor_codec import decode_tensor_proto, encode_tensor_proto
from evaluator.formats.tfrecord import Record, encode_record, iter_records, read_record

__all__ = [
    "COLLECTIONS_PREFIX",
    "Collection",
    "CollectionsFile",
    "END_OF_JOB_KEY",
    "EVENTS_PREFIX",
    "FOOTER_MAGIC",
    "INDEX_PREFIX",
    "IndexFile",
    "IndexMeta",
    "REDUCTIONS_PREFIX",
    "Record",
    "ReductionConfig",
    "SaveConfigMode",
    "ShapeEntry",
    "TensorEntry",
    "TensorEvent",
    "collections_key",
    "decode_record_value",
    "decode_tensor_event",
    "decode_tensor_proto",
    "decode_tensor_value",
    "deserialize_tf_device",
    "encode_record",
    "encode_tensor_event",
    "encode_tensor_proto",
    "event_key",
    "index_key",
    "is_collections_key",
    "is_index_key",
    "iter_records",
    "masked_crc32c",
    "parse_collections_file",
    "parse_index_file",
    "parse_index_key",
    "parse_reduction_tensor_name",
    "read_record",
    "reduction_tensor_name",
    "serialize_collections_file",
    "serialize_index_file",
    "serialize_tf_device",
    "worker_from_collections_key",
]
