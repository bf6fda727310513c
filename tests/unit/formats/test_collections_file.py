"""Collections JSON: smdebug's loading rules, byte-exact export, and the golden answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.errors import SMDebugValueError
from evaluator.formats.collections_file import (
    Collection,
    CollectionsFile,
    ReductionConfig,
    SaveConfigMode,
    parse_collections_file,
    serialize_collections_file,
)
from evaluator.modes import ModeKeys
from tests.unit.formats.fixture_files import COLLECTION_FILES, GOLDEN, file_id

SPEC_EXAMPLE = json.dumps(
    {
        "collections": {
            "weights": {
                "name": "weights",
                "include_regex": ["^conv.*weight"],
                "tensor_names": ["conv1.weight", "fc.weight"],
                "reduction_config": {
                    "save_raw_tensor": True,
                    "reductions": "mean,max,l2_norm,abs_min,abs_l1_norm",
                    "save_shape": True,
                },
                "save_config": {
                    "TRAIN": {
                        "save_interval": 10,
                        "save_steps": [],
                        "start_step": 5,
                        "end_step": 100,
                    },
                    "EVAL": {
                        "save_interval": 500,
                        "save_steps": [1, 2],
                        "start_step": 0,
                        "end_step": None,
                    },
                    "PREDICT": None,
                    "GLOBAL": None,
                },
                "save_histogram": True,
            },
            "losses": {
                "name": "losses",
                "include_regex": [],
                "tensor_names": [],
                "reduction_config": None,
                "save_config": None,
                "save_histogram": True,
            },
        },
        "_meta": {"num_workers": 2},
    }
)


def test_parse_spec_example() -> None:
    """The spec's example parses into smdebug-shaped objects."""
    parsed = parse_collections_file(SPEC_EXAMPLE)
    assert parsed.num_workers == 2
    weights = parsed.collections["weights"]
    assert weights.include_regex == ["^conv.*weight"]
    assert weights.tensor_names == {"conv1.weight", "fc.weight"}
    assert weights.reduction_config == ReductionConfig(
        reductions=["mean", "max"],
        abs_reductions=["min"],
        norms=["l2"],
        abs_norms=["l1"],
        save_raw_tensor=True,
        save_shape=True,
    )
    assert weights.save_config is not None
    assert weights.save_config[ModeKeys.TRAIN] == SaveConfigMode(10, [], 5, 100)
    assert weights.save_config[ModeKeys.EVAL] == SaveConfigMode(500, [1, 2], 0, None)
    assert weights.save_config[ModeKeys.PREDICT] is None
    assert parsed.collections["losses"].reduction_config is None


def test_serialize_spec_example_byte_exact() -> None:
    """Export reproduces json.dumps of smdebug's dicts, key order included."""
    assert serialize_collections_file(parse_collections_file(SPEC_EXAMPLE)) == SPEC_EXAMPLE.encode()


@pytest.mark.parametrize("path", COLLECTION_FILES, ids=file_id)
def test_every_fixture_collections_file_round_trips_byte_exact(path: Path) -> None:
    """Parsing then serializing each smdebug-written collections file gives the same bytes."""
    data = path.read_bytes()
    assert serialize_collections_file(parse_collections_file(data)) == data


@pytest.mark.parametrize("path", COLLECTION_FILES, ids=file_id)
def test_to_json_dict_matches_golden_collections(path: Path) -> None:
    """Collection.to_json_dict equals what smdebug 1.0.34 reported for trial.collections."""
    scenario = path.parents[2].name
    golden = json.loads((GOLDEN / f"{scenario}.query.json").read_text())["trial"]["collections"]
    parsed = parse_collections_file(path.read_bytes())
    assert {name: c.to_json_dict() for name, c in parsed.collections.items()} == golden


def test_reductions_string_order() -> None:
    """The comma-joined form lists plain, then X_norm, then abs_X, then abs_X_norm."""
    config = ReductionConfig(
        reductions=["std"], abs_reductions=["max"], norms=["l1"], abs_norms=["l2"]
    )
    assert config.to_json_dict() == {
        "save_raw_tensor": False,
        "reductions": "std,l1_norm,abs_max,abs_l2_norm",
        "save_shape": False,
    }


def test_reductions_string_is_split_and_stripped() -> None:
    """The parser splits on commas, strips whitespace and skips empty items."""
    config = ReductionConfig.from_dict({"reductions": " abs_l2_norm , min,,l1_norm "})
    assert (config.reductions, config.norms, config.abs_norms) == (["min"], ["l1"], ["l2"])


@pytest.mark.parametrize("reductions", ["median", "abs_l3_norm", "l3_norm", "abs_foo"])
def test_invalid_reduction_names_are_refused(reductions: str) -> None:
    """Names outside smdebug's allowed reductions and norms raise SMDebugValueError."""
    with pytest.raises(SMDebugValueError):
        ReductionConfig.from_dict({"reductions": reductions})


def test_save_raw_tensor_must_be_boolean() -> None:
    """save_raw_tensor is checked to be a boolean, as smdebug does."""
    with pytest.raises(SMDebugValueError, match="save_raw_tensor"):
        ReductionConfig.from_dict({"save_raw_tensor": "yes"})


def wrap(collections: object, meta: object = None) -> str:
    return json.dumps({"collections": collections, "_meta": {} if meta is None else meta})


def test_meta_defaults_and_string_worker_count() -> None:
    """An empty _meta means one worker; num_workers goes through int(), so "3" works."""
    assert parse_collections_file(wrap({})).num_workers == 1
    assert parse_collections_file(wrap({}, {"num_workers": "3"})).num_workers == 3


def test_collection_defaults_and_unknown_keys() -> None:
    """Missing keys take defaults (include_regex [], smdebug: False); unknown keys are ignored."""
    parsed = parse_collections_file(wrap({"c": {"name": "c", "colour": "blue"}}))
    assert parsed.collections["c"] == Collection("c")


def test_collection_is_filed_under_its_own_name() -> None:
    """Like smdebug, the inner name is the key; a nameless entry takes the outer key."""
    parsed = parse_collections_file(wrap({"outer": {"name": "inner"}, "nameless": {}}))
    assert set(parsed.collections) == {"inner", "nameless"}


def test_partial_save_config_is_filled_with_none() -> None:
    """Modes missing from save_config are None; smdebug's "x or default" applies inside."""
    entry = {"name": "c", "save_config": {"EVAL": {"save_interval": 0, "end_step": 0}}}
    config = parse_collections_file(wrap({"c": entry})).collections["c"].save_config
    assert config == {
        ModeKeys.EVAL: SaveConfigMode(500, [], 0, None),
        ModeKeys.TRAIN: None,
        ModeKeys.PREDICT: None,
        ModeKeys.GLOBAL: None,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("{oops", "not valid JSON"),
        ("[]", "JSON object"),
        (
            '{"collections": {}, "_meta": {}, "extra": 1}',
            "^allowed params for collection manager can only be one of collections,_meta$",
        ),
        ('{"_meta": {}}', "'collections'"),
        ('{"collections": {}}', "'_meta'"),
        ('{"collections": [], "_meta": {}}', "must be objects"),
        (wrap({}, {"num_workers": "many"}), "num_workers"),
        (wrap({"c": []}), "must be an object"),
        (wrap({"c": {"name": "c", "include_regex": 5}}), "include_regex"),
        (wrap({"c": {"name": "c", "save_config": {"TRAINING": None}}}), "TRAINING"),
        (wrap({"c": {"save_config": {"TRAIN": {"save_interval": "x"}}}}), "save_config"),
        (wrap({"c": {"name": "c", "reduction_config": {"reductions": "mode"}}}), "reductions"),
        (wrap({"c": {"name": 3}}), "name"),
    ],
)
def test_malformed_files_raise_value_errors(text: str, message: str) -> None:
    """Every malformed file raises SMDebugValueError saying what is wrong (never KeyError)."""
    with pytest.raises(SMDebugValueError, match=message):
        parse_collections_file(text)


def test_collection_helpers() -> None:
    """include/add_tensor_name/has_tensor_name behave like smdebug's."""
    collection = Collection("c")
    collection.include("^a")
    collection.include(["^b", "^c"])
    collection.add_tensor_name("x")
    assert collection.include_regex == ["^a", "^b", "^c"]
    assert collection.has_tensor_name("x") and not collection.has_tensor_name("y")
    assert hash(collection) == hash("c")


def test_serialize_sorts_tensor_names() -> None:
    """tensor_names are exported sorted, for deterministic files."""
    document = CollectionsFile({"c": Collection("c", tensor_names={"b", "a"})}, num_workers=4)
    exported = json.loads(serialize_collections_file(document))
    assert exported["collections"]["c"]["tensor_names"] == ["a", "b"]
    assert exported["_meta"] == {"num_workers": 4}


def test_a_collections_file_over_the_byte_limit_is_refused_before_parsing() -> None:
    """A collections file larger than ``max_bytes`` is refused without being parsed, the
    error naming the file and the limit."""
    with pytest.raises(SMDebugValueError, match=r"c\.json is 101 bytes.*limit of 100"):
        parse_collections_file(b"[" * 101, max_bytes=100, source="c.json")
