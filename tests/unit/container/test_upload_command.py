"""rule-evaluator upload: a folder copied to S3 key by key (the CI recipe's step), a missing
bucket named unless --create-bucket, and bad arguments refused (issue 26, friction 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.upload_command import main
from tests.support.s3server import MotoS3


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
    [(["/no/such/folder", "s3://b/p"], "is not a folder"), (["{tmp}", "b/p"], "s3://")],
)
def test_bad_arguments_are_client_errors(
    tmp_path: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing folder or a URI that is not s3:// ends in exit 2 naming it."""
    assert main([a.replace("{tmp}", str(tmp_path)) for a in args]) == 2
    assert said in capsys.readouterr().err
