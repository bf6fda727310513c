"""rule-evaluator upload: a folder copied key by key to S3 (the CI recipe's step), to another
folder or to any registered scheme with an uploader, through the storage scheme registry; a
missing bucket named unless --create-bucket, and bad arguments refused (issues 26 and 27)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from container import upload_command
from container.upload_command import main
from evaluator.formats.collections_file import Collection
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from tests.support.mem_scheme import BUCKETS, READ_ONLY_MEM_SCHEME, registered
from tests.support.s3server import MotoS3


def _trial(folder: Path, steps: int = 3) -> Path:
    writer = TrialWriter(folder)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    for step in range(steps):
        writer.write_step(step, {"loss": np.array([1.0 / (step + 1)], dtype=np.float32)})
    writer.end_training()
    return folder


def _digests(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` by relative path, with the SHA-256 of its bytes."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def mem_scheme() -> Iterator[None]:
    """The ``mem://`` test scheme (with its uploader), registered for one test only."""
    with registered():
        yield


def test_a_folder_is_uploaded_under_the_prefix(
    tmp_path: Path, s3_server: MotoS3, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file lands at prefix/<relative path>, the bucket made by --create-bucket."""
    (tmp_path / "index" / "000000000").mkdir(parents=True)
    (tmp_path / "index" / "000000000" / "a.json").write_text("{}")
    (tmp_path / "training_job_end.ts").write_text("")
    assert main([str(tmp_path), "s3://new-upload-bucket/job/debug-output", "--create-bucket"]) == 0
    listed = s3_server.client().list_objects_v2(Bucket="new-upload-bucket")
    assert sorted(o["Key"] for o in listed["Contents"]) == [
        "job/debug-output/index/000000000/a.json",
        "job/debug-output/training_job_end.ts",
    ]
    assert "uploaded 2 file(s)" in capsys.readouterr().out


def test_a_missing_bucket_is_named(
    tmp_path: Path, s3_server: MotoS3, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --create-bucket a missing bucket is a ClientError saying to add it."""
    (tmp_path / "f").write_text("x")
    assert main([str(tmp_path), "s3://no-such-upload-bucket/p"]) == 2
    assert "--create-bucket" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["/no/such/folder", "s3://b/p"], "is not a folder"),
        (["{tmp}", "gs://b/p"], "must be s3://<bucket>/<prefix>, a folder or a file:// URI"),
        (["{tmp}", "s3://"], "the destination must be s3://<bucket>/<prefix>"),
    ],
)
def test_bad_arguments_are_client_errors(
    tmp_path: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing folder or a destination of no known scheme (or malformed) ends in exit 2
    naming it and the forms accepted."""
    assert main([a.replace("{tmp}", str(tmp_path)) for a in args]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("form", ["path", "file://"])
def test_a_trial_is_copied_to_another_folder(
    tmp_path: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain path or a file:// URI is a destination: the folder (made as needed) gets every
    file byte for byte, reads as the same trial, and the source is left as it was."""
    source = _trial(tmp_path / "trial")
    before = _digests(source)
    copy = tmp_path / "copies" / "job" / "debug-output"
    assert main([str(source), f"file://{copy}" if form == "file://" else str(copy)]) == 0
    assert _digests(copy) == before and _digests(source) == before
    assert not list(copy.rglob("*.tmp"))
    assert f"uploaded {len(before)} file(s) from {source} to {copy}" in capsys.readouterr().out
    with create_trial(str(copy)) as trial:
        assert trial.steps() == [0, 1, 2]
        assert trial.tensor("loss").value(2).tolist() == pytest.approx([1 / 3])


def test_a_folder_copy_replaces_older_files_and_keeps_others(tmp_path: Path) -> None:
    """Uploading again over a folder replaces the files of the same name, as a second upload to
    S3 replaces its objects, and leaves the destination's other files alone."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "rule.py").write_text("new")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "rule.py").write_text("old")
    (tmp_path / "dst" / "notes.txt").write_text("mine")
    assert main([str(tmp_path / "src"), str(tmp_path / "dst")]) == 0
    assert (tmp_path / "dst" / "rule.py").read_text() == "new"
    assert (tmp_path / "dst" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("inside", [".", "sub/copy"])
def test_a_folder_is_not_copied_into_itself(
    tmp_path: Path, inside: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The source itself or a folder below it as destination is a ClientError, and nothing is
    written."""
    source = _trial(tmp_path / "trial")
    before = _digests(source)
    assert main([str(source), str(source / inside)]) == 2
    assert "into itself" in capsys.readouterr().err
    assert _digests(source) == before


def test_a_file_as_destination_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A destination that is a file, not a folder, is a ClientError naming it."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("x")
    (tmp_path / "taken").write_text("")
    assert main([str(tmp_path / "src"), str(tmp_path / "taken")]) == 2
    assert f"{tmp_path / 'taken'} is a file, not a folder" in capsys.readouterr().err


def test_any_scheme_with_an_uploader_is_a_destination(
    tmp_path: Path, mem_scheme: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registered scheme's uploader gets every file under the prefix, is handed the
    endpoint wait, and a missing bucket is named unless --create-bucket, as for S3."""
    source = _trial(tmp_path / "trial", steps=2)
    assert main([str(source), "mem://jobs/a/debug-output"]) == 2
    assert "bucket 'mem://jobs' does not exist: add --create-bucket" in capsys.readouterr().err
    assert main([str(source), "mem://jobs/a/debug-output", "--create-bucket"]) == 0
    store = BUCKETS["mem://jobs"]
    assert {f"a/debug-output/{key}": digest for key, digest in _digests(source).items()} == {
        key: hashlib.sha256(store._get(key)).hexdigest() for key in store._keys
    }
    assert "to mem://jobs/a/debug-output" in capsys.readouterr().out


def test_a_scheme_without_an_uploader_names_the_writable_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read-only registered scheme is a ClientError naming the locations that can be
    written: S3 and folders, not itself."""
    (tmp_path / "f").write_text("x")
    with registered(READ_ONLY_MEM_SCHEME):
        assert main([str(tmp_path), "mem://bucket/p"]) == 2
    err = capsys.readouterr().err
    assert "cannot upload to mem://bucket/p: mem:// locations are only read here" in err
    assert "upload to s3://<bucket>/<prefix>, a folder or a file:// URI" in err


def test_an_unreachable_endpoint_is_named_without_its_password(
    tmp_path: Path,
    s3_server: MotoS3,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An S3 endpoint that refuses connections is waited for, then named with a hint, and a
    password in its URL never reaches the message."""
    (tmp_path / "f").write_text("x")
    monkeypatch.setattr(upload_command, "ENDPOINT_WAIT", 0.5)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://ci:hunter2secret@127.0.0.1:9")
    assert main([str(tmp_path), "s3://some-bucket/p"]) == 2
    err = capsys.readouterr().err
    assert "(tried for 0.5 s): is the S3 server running there?" in err
    assert "hunter2secret" not in err and "127.0.0.1:9" in err


def test_an_endpoint_that_never_answers_ends_in_its_read_timeout(s3_server: MotoS3) -> None:
    """An S3 endpoint that takes the connection and never answers ends the upload in a
    StorageError naming the read timeout, not in a wait without end."""
    from evaluator.errors import StorageError
    from evaluator.storage.schemes import open_uploader
    from tests.support.stalling_endpoints import BlackHole

    with BlackHole() as hole, pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", hole.endpoint)
        uploader = open_uploader("s3://some-bucket/p", endpoint_wait=0.0, read_timeout=0.3)
        with pytest.raises(StorageError, match=r"sent no answer within 0\.3 s \(3 attempts\)"):
            uploader.ready(create=False)
        uploader.close()
