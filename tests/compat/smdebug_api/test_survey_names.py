"""Every name in docs/compatibility.md, "smdebug names used by published code", resolves: the
``smdebug.*`` ones import, the ``Trial.`` / ``Tensor.`` / ``Rule.`` ones are attributes of a
real trial, tensor and rule. Then a few of them are checked for smdebug's meaning."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.compat.smdebug_api.trials import end_job, write_steps

DOC = Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"
SECTION = "## smdebug names used by published code"


def surveyed_names() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", body, flags=re.MULTILINE)


NAMES = surveyed_names()


def test_the_survey_table_is_there() -> None:
    """The table lists both module names and attributes (a guard against a moved heading)."""
    assert len(NAMES) > 60
    assert "Trial._global_to_mode" in NAMES
    assert "smdebug.core.config_constants.MISSING_EVENT_FILE_RETRY_LIMIT_KEY" in NAMES


def resolve_import(dotted: str) -> Any:
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        module, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(module), attr)


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from smdebug.rules import Rule
    from smdebug.trials import create_trial

    root = tmp_path_factory.mktemp("survey")
    write_steps(root, range(3))
    end_job(root)
    trial = create_trial(str(root))

    class Probe(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return False

    return {"Trial": trial, "Tensor": trial.tensor("foo_0"), "Rule": Probe(trial)}


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("smdebug")])
def test_module_names_import(name: str) -> None:
    """``smdebug.…`` names of the survey import from our shim."""
    assert resolve_import(name) is not None


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("smdebug")])
def test_attribute_names_exist(name: str, objects: dict[str, Any]) -> None:
    """``Trial.x``, ``Tensor.x`` and ``Rule.x`` of the survey are attributes of real objects."""
    kind, _, attr = name.partition(".")
    assert hasattr(objects[kind], attr), name


def test_the_shim_is_the_one_answering() -> None:
    """The names come from our package, not from some other smdebug."""
    import smdebug

    assert getattr(smdebug, "__evaluator_shim__", False)


def test_bookkeeping_views_are_read_only(objects: dict[str, Any]) -> None:
    """Writing into ``_global_to_mode`` and friends is refused: they are the trial's state."""
    trial = objects["Trial"]
    for view in (trial._global_to_mode, trial.workers_for_global_step, trial._mode_to_global):
        with pytest.raises(TypeError):
            view[99] = None


def test_private_helpers_answer_as_smdebug(objects: dict[str, Any]) -> None:
    """``_tensors_for_step``, ``_all_steps``, ``_tensors`` and the collection helpers."""
    from smdebug import modes

    trial = objects["Trial"]
    assert trial._tensors_for_step(1) == ["foo_0", "foo_1", "foo_2"]
    assert trial._tensors_for_step(50) == []
    with pytest.raises(KeyError):
        trial._tensors_for_step(0, mode=modes.TRAIN)  # no TRAIN steps: smdebug's KeyError
    assert trial._all_steps() == [0, 1, 2]
    assert trial._all_steps(modes.EVAL) == []
    assert sorted(trial._tensors) == ["foo_0", "foo_1", "foo_2"]
    assert trial._tensors["foo_1"].name == "foo_1"
    assert trial._tensors_matching_regex(["_1$", "_2$"]) == {"foo_1", "foo_2"}
    assert trial._tensors_in_collection("default") == {"foo_0", "foo_1", "foo_2"}
    assert trial._parse_collection_name(trial.collection("default")) == "default"
    with pytest.raises(TypeError):
        trial._parse_collection_name(3)
    assert trial._global_step_currently(modes.GLOBAL, 2) == 2
    assert trial._mode_modestep_currently(2) == (modes.GLOBAL, 2)
    assert trial._mode_modestep_currently(9) is None


def test_core_utils_helpers() -> None:
    """Paths, worker names and step ranges as smdebug's ``core.utils`` computes them."""
    from smdebug.core.utils import (
        deserialize_tf_device,
        get_path_to_collections,
        get_worker_name_from_collection_file,
        is_s3,
        parse_worker_name_from_file,
        serialize_tf_device,
        step_in_range,
    )
    from smdebug.exceptions import IndexReaderException

    assert is_s3("s3://bucket/a/b") == (True, "bucket", "a/b")
    assert is_s3("s3://bucket") == (True, "bucket", "")
    assert is_s3("/tmp/x") == (False, None, None)
    device = "/job:worker/replica:0/task:1/device:GPU:6"
    assert deserialize_tf_device(serialize_tf_device(device)) == device
    assert parse_worker_name_from_file("/t/index/000000001/000000001230_worker_2.json") == (
        "worker_2"
    )
    served = "/t/index/000000000/000000000499__job-worker_replica-0_task-1_device-GPU-6.json"
    assert parse_worker_name_from_file(served) == device
    with pytest.raises(IndexReaderException):
        parse_worker_name_from_file("/t/index/000000001/000000001230_worker_2.json.tmp")
    assert get_worker_name_from_collection_file(
        "/t/collections/000000000/w_1_collections.json"
    ) == ("w_1")
    assert get_path_to_collections("/t") == os.path.join("/t", "collections", "000000000", "")
    assert step_in_range((2, 5), 4) and not step_in_range((2, 5), 5)
    assert step_in_range((None, None), 10**9)


def test_index_file_locations_match_the_files_we_read(tmp_path: Path) -> None:
    """``IndexFileLocationUtils`` names the index files a trial actually lists."""
    from smdebug.core.locations import IndexFileLocationUtils as Loc
    from smdebug.trials import create_trial

    write_steps(tmp_path, [1234])
    key = Loc.get_index_key_for_step(str(tmp_path), 1234, "worker_0")
    assert Path(key).is_file()
    assert Loc.parse_step_from_index_file_name(key) == 1234
    assert Loc.get_prefix_from_index_file(key) == str(tmp_path)
    assert Loc.get_index_prefix_for_step(1234) == "000000001"
    assert create_trial(str(tmp_path)).last_index_token == key


def test_parameter_parsers() -> None:
    """``parse_bool`` and ``parse_list_from_str`` read rule parameters as smdebug does."""
    from smdebug.analysis.utils import parse_bool, parse_list_from_str

    assert parse_bool("true", False) is True
    assert parse_bool(None, True) is True
    assert parse_bool(False, True) is False
    with pytest.raises(ValueError):
        parse_bool("yes", False)
    assert parse_list_from_str("a,b") == ["a", "b"]
    assert parse_list_from_str("a;b", delimiter=";") == ["a", "b"]
    assert parse_list_from_str("") == parse_list_from_str(None) == []
    assert parse_list_from_str(["x"]) == ["x"]


def test_file_writer_and_collection_manager_write_a_readable_trial(tmp_path: Path) -> None:
    """A trial written with smdebug's low-level writer names (``CollectionManager.export``,
    ``FileWriter.write_tensor`` with and without a mode) reads back value for value."""
    import numpy as np
    from smdebug import modes
    from smdebug.core.collection_manager import CollectionManager
    from smdebug.core.config_constants import DEFAULT_COLLECTIONS_FILE_NAME
    from smdebug.core.writer import FileWriter
    from smdebug.trials import create_trial

    manager = CollectionManager()
    manager.add("default")
    manager.get("default").tensor_names = ["w"]
    manager.export(str(tmp_path), DEFAULT_COLLECTIONS_FILE_NAME)
    for step in range(4):
        with FileWriter(trial_dir=str(tmp_path), step=step, worker="algo-1") as writer:
            mode = None if step < 2 else modes.EVAL
            writer.write_tensor(tdata=np.full(2, step, np.float32), tname="w", mode=mode)
            writer.write_tensor(tdata=float(step), tname="scalar", mode=mode)
    trial = create_trial(str(tmp_path))
    assert trial.workers() == ["worker_0"]  # named by the collections file, as smdebug
    assert trial.tensor("w").workers(3) == ["algo-1"]
    assert trial.tensor_names(collection="default") == ["w"]
    assert trial.steps(mode=modes.EVAL) == [2, 3]
    np.testing.assert_array_equal(trial.tensor("w").value(3), np.full(2, 3, np.float32))
    assert trial.tensor("scalar").value(1).tolist() == [1.0]
    loaded = CollectionManager.load(
        str(tmp_path / "collections" / "000000000" / DEFAULT_COLLECTIONS_FILE_NAME)
    )
    assert loaded.get("default").tensor_names == {"w"}
    assert loaded.get_num_workers() == 1


def test_has_training_ended_local_and_s3(tmp_path: Path, upload_folder: Any) -> None:
    """``has_training_ended`` says whether the end marker exists, locally and on S3."""
    from smdebug.core.access_layer import has_training_ended
    from smdebug.core.access_layer.utils import has_training_ended as same

    assert same is has_training_ended
    write_steps(tmp_path, range(2))
    assert has_training_ended(str(tmp_path)) is False
    assert has_training_ended(str(tmp_path / "no-such-folder")) is False
    running = upload_folder(tmp_path, "jobs/running")
    end_job(tmp_path)
    assert has_training_ended(str(tmp_path)) is True
    ended = upload_folder(tmp_path, "jobs/ended")
    assert has_training_ended(running) is False
    assert has_training_ended(ended) is True


def test_index_reader_lists_as_smdebug_spells_it(tmp_path: Path, upload_folder: Any) -> None:
    """``trial.index_reader`` and the standalone readers list index and event files: paths
    and a list locally, bucket keys and ``(keys, last key)`` on S3."""
    from smdebug.core.index_reader import LocalIndexReader, S3IndexReader
    from smdebug.core.utils import parse_worker_name_from_file
    from smdebug.trials import create_trial

    write_steps(tmp_path, [0, 5, 1200])
    local = create_trial(str(tmp_path)).index_reader
    index_files = local.list_index_files()
    assert index_files == [
        f"{tmp_path}/index/000000000/000000000000_worker_0.json",
        f"{tmp_path}/index/000000000/000000000005_worker_0.json",
        f"{tmp_path}/index/000000001/000000001200_worker_0.json",
    ]
    assert parse_worker_name_from_file(index_files[0]) == "worker_0"
    events = local.list_event_files()
    assert [Path(e).name for e in events] == [
        "000000000000_worker_0.tfevents",
        "000000000005_worker_0.tfevents",
        "000000001200_worker_0.tfevents",
    ]
    assert local.list_event_files(events[1]) == events[1:]
    assert LocalIndexReader(str(tmp_path)).list_index_files() == index_files

    uri = upload_folder(tmp_path, "jobs/listed")
    keys, last = create_trial(uri).index_reader.list_index_files()
    assert keys[0] == "jobs/listed/index/000000000/000000000000_worker_0.json"
    assert last == keys[-1] == "jobs/listed/index/000000001/000000001200_worker_0.json"
    assert S3IndexReader(uri).list_index_files(keys[0]) == (keys[1:], last)
    assert create_trial(uri).index_reader.event_file_retry_limit == 30


def test_list_s3_objects(tmp_path: Path, upload_folder: Any, s3_bucket: str) -> None:
    """``list_s3_objects`` lists a bucket's keys under a prefix, after a key, with the last."""
    from smdebug.core.s3_utils import list_s3_objects

    write_steps(tmp_path, [0, 1])
    upload_folder(tmp_path, "jobs/s3list")
    keys, last = list_s3_objects(s3_bucket, "jobs/s3list/index")
    assert keys == [
        "jobs/s3list/index/000000000/000000000000_worker_0.json",
        "jobs/s3list/index/000000000/000000000001_worker_0.json",
    ]
    assert last == keys[-1]
    assert list_s3_objects(s3_bucket, "jobs/s3list/index", keys[0]) == (keys[1:], keys[1])
    assert list_s3_objects(s3_bucket, "jobs/nothing/") == ([], None)
