"""Where outputs named after the data go (``evaluator.config.output_paths``): no name puts a
file outside the output folder or over the batch's or the run's own files."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.batch.summary import SUMMARY_CSV, SUMMARY_JSON, SUMMARY_PAGE
from evaluator.config.output_paths import (
    BATCH_FOLDER,
    RESERVED_NAMES,
    RUN_FILES,
    file_inside,
    job_paths,
    output_path,
    safe_name,
)
from evaluator.config.trial_list import trial_names
from evaluator.errors import ConfigurationError
from evaluator.report.data import DATA_FILE_NAME, IGNORED_DIR
from evaluator.report.writer import REPORT_FILE_NAME
from evaluator.status.files import RESULT_FILE_NAME


def test_the_reserved_names_are_what_the_batch_and_a_run_write() -> None:
    """Every entry a batch or a single run writes at the top of its output folder is
    reserved, under the names the writers use."""
    written = {BATCH_FOLDER, SUMMARY_JSON, SUMMARY_CSV, SUMMARY_PAGE}
    written |= {RESULT_FILE_NAME, REPORT_FILE_NAME, DATA_FILE_NAME, IGNORED_DIR}
    assert set(RUN_FILES) == {RESULT_FILE_NAME, REPORT_FILE_NAME, DATA_FILE_NAME, IGNORED_DIR}
    assert RESERVED_NAMES == {n.lower() for n in written}


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("..", "_.."),
        (".", "_."),
        ("...", "_..."),
        ("", "trial"),
        (".batch", "_.batch"),
        ("index.html", "_index.html"),
        ("Index.HTML", "_Index.HTML"),
        ("batch_summary.json", "_batch_summary.json"),
        (".sagemaker-ignore", "_.sagemaker-ignore"),
        ("rule_evaluation_result.json", "_rule_evaluation_result.json"),
        ("a/../b", "a_.._b"),
        ("/etc", "_etc"),
        ("run-7", "run-7"),
        (".hidden", ".hidden"),
    ],
)
def test_safe_name_rewrites_what_could_leave_or_collide(text: str, name: str) -> None:
    """Dots-only, empty and reserved names are rewritten; separators become '_'."""
    assert safe_name(text) == name
    assert safe_name(name) == name  # a safe name is its own


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "/abs", ".batch", "index.html", "x\0"])
def test_output_path_refuses_an_unsafe_name(name: str, tmp_path: Path) -> None:
    """The check at the point of writing: a name that is not its own safe name is refused."""
    with pytest.raises(ConfigurationError, match="cannot name an output folder"):
        output_path(tmp_path, name)
    with pytest.raises(ConfigurationError):
        job_paths(tmp_path, name)


def test_job_paths_stay_in_the_output_folder(tmp_path: Path) -> None:
    """A job's folder, request, log and message folder are all below the batch's folder."""
    paths = job_paths(tmp_path, "_..")
    for path in (paths.output, paths.request, paths.log, paths.opt_ml):
        assert path.resolve().is_relative_to(tmp_path.resolve()), path
    assert paths.output == tmp_path / "_.."
    assert paths.report == "_../rule_report.html"


@pytest.mark.parametrize("relative", ["../x", "a/../../x", "/etc/passwd", "", "a//b", "./a"])
def test_file_inside_refuses_a_path_that_could_leave(relative: str, tmp_path: Path) -> None:
    """A returned file's path with a '..', '.', empty or absolute part is refused."""
    with pytest.raises(ConfigurationError, match="is not a file inside"):
        file_inside(tmp_path, relative)
    assert file_inside(tmp_path, "a/b.json") == tmp_path / "a" / "b.json"


def test_trial_names_are_safe_output_folders() -> None:
    """Trials in folders named '..', '.batch', 'index.html' or 'batch_summary.json' get folder
    names that are neither; a local 'sub/..' is the folder it means."""
    trials = [
        "s3://b/jobs/..",
        "s3://b/x/.batch",
        "/d/index.html",
        "/d/batch_summary.json",
        "/d/run/sub/..",
        "file:///e/sub/..",
    ]
    names = trial_names(trials)
    assert names == ["_..", "_.batch", "_index.html", "_batch_summary.json", "run", "e"]
    for name in names:
        assert output_path(Path("/out"), name).parent == Path("/out")
