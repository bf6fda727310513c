"""The names evaluator.formats exports."""

from __future__ import annotations

import evaluator.formats as formats


def test_all_is_sorted_and_importable() -> None:
    """__all__ is sorted and every name in it exists."""
    assert formats.__all__ == sorted(formats.__all__)
    for name in formats.__all__:
        assert getattr(formats, name) is not None


def test_public_names_are_pinned() -> None:
    """The lead's trial cache relies on these names; changing them is an API change."""
    assert set(formats.__all__) >= {
        "COLLECTIONS_PREFIX",
        "END_OF_JOB_KEY",
        "EVENTS_PREFIX",
        "FOOTER_MAGIC",
        "INDEX_PREFIX",
        "Collection",
        "CollectionsFile",
        "IndexFile",
        "IndexMeta",
        "Record",
        "ReductionConfig",
        "SaveConfigMode",
        "ShapeEntry",
        "TensorEntry",
        "TensorEvent",
        "collections_key",
        "decode_record_value",
        "decode_tensor_event",
        "decode_tensor_value",
        "deserialize_tf_device",
        "encode_record",
        "encode_tensor_event",
        "event_key",
        "index_key",
        "is_collections_key",
        "is_index_key",
        "iter_records",
        "masked_crc32c",
        "parse_collections_file",
        "parse_index_file",
        "parse_index_key",
        "read_record",
        "serialize_collections_file",
        "serialize_index_file",
        "serialize_tf_device",
        "worker_from_collections_key",
    }
