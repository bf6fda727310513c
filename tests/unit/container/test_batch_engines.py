"""What a Ray task of ``rule-evaluator batch`` sends back and how the batch stores it
(``container.batch.engines``), on real files: only the job's own folder's regular files, and
never a path outside the job's folder under ``--output-dir``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from container.batch.engines import _job_on_node, _regular_files, _store
from container.batch.job import JobSpec
from evaluator.errors import ConfigurationError


def test_only_the_jobs_regular_files_are_sent_back(tmp_path: Path) -> None:
    """Links (to a file or a folder outside), FIFOs and ``.sagemaker-ignore`` stay on the node;
    the job's own files come back by their path inside its folder."""
    node = tmp_path / "node"
    job = node / "run-1"
    (job / "sub").mkdir(parents=True)
    (job / ".sagemaker-ignore").mkdir()
    (job / "rule_evaluation_result.json").write_text("{}")
    (job / "sub" / "x.txt").write_text("x")
    (job / ".sagemaker-ignore" / "tmp").write_text("t")
    (node / "credentials").write_text("secret")
    (node / "other-job").mkdir()
    (node / "other-job" / "rule_evaluation_result.json").write_text("theirs")
    os.symlink(node / "credentials", job / "creds-link")
    os.symlink(node / "other-job", job / "folder-link")
    os.mkfifo(job / "pipe")
    files = _regular_files(job)
    assert files == {"rule_evaluation_result.json": b"{}", "sub/x.txt": b"x"}


def test_a_job_named_dot_dot_is_refused_on_the_node(tmp_path: Path) -> None:
    """A task given a job whose name would be the node's temporary folder's parent fails
    before it runs anything (the batch never names a job so)."""
    with pytest.raises(ConfigurationError, match="cannot name an output folder"):
        _job_on_node(JobSpec("..", str(tmp_path), ("--rule", "VanishingGradient")))


@pytest.mark.parametrize("relative", ["../escaped.txt", "/tmp/abs.txt", "a/../../escaped.txt"])
def test_a_returned_path_outside_the_job_is_refused_and_nothing_written(
    relative: str, tmp_path: Path
) -> None:
    """A task's answer with a path leaving the job's folder is refused whole: no file of it
    is written, inside or outside ``--output-dir``."""
    root = tmp_path / "out"
    root.mkdir()
    spec = JobSpec("run-1", "/trial", ())
    answer = {"rule_evaluation_result.json": b"{}", relative: b"bad"}
    with pytest.raises(ConfigurationError, match="is not a file inside"):
        _store(root, spec, answer, b"log", 1.0)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out"]


def test_a_returned_answer_is_stored_in_the_jobs_folder(tmp_path: Path) -> None:
    """The files land in ``<out>/<job>/``, the log and request under ``.batch``."""
    root = tmp_path / "out"
    root.mkdir()
    spec = JobSpec("_..", "s3://b/jobs/..", ("--rule", "X"))
    _store(root, spec, {"rule_evaluation_result.json": b"{}", "a/b.txt": b"b"}, b"log", 1.5)
    assert (root / "_.." / "rule_evaluation_result.json").read_bytes() == b"{}"
    assert (root / "_.." / "a" / "b.txt").read_bytes() == b"b"
    assert (root / ".batch" / "logs" / "_...log").read_bytes() == b"log"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_job_the_pool_cannot_run_is_that_jobs_error(tmp_path: Path) -> None:
    """When the batch cannot even start a job (here its ``.batch`` folder is a file), that job
    is an ``Error`` with exit 3 saying why, handed to ``done`` like any other; nothing raises."""
    import threading

    from container.batch.engines import run_on_pool

    (tmp_path / ".batch").write_text("not a folder")
    seen = []
    outcomes = run_on_pool(
        [JobSpec("run-1", str(tmp_path), ("--rule", "VanishingGradient"))],
        tmp_path,
        jobs=1,
        stop=threading.Event(),
        stop_code=lambda: 143,
        done=seen.append,
    )
    assert seen == outcomes and len(outcomes) == 1
    assert (outcomes[0].status, outcomes[0].exit_code) == ("Error", 3)
    assert outcomes[0].message is not None
    assert outcomes[0].message.startswith("InternalServerError: the batch could not run this job")
