"""Rule code from an S3 prefix: keys stay inside the download folder, folder markers are
skipped, file-system refusals are client errors, and stale download folders are cleaned."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from evaluator.rules.loader import remove_stale_source_folders, source_folder
from tests.compat.golden import DATA
from tests.integration.test_evaluate_command import CUSTOM_RULE, FIRED, Run


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def _evaluate(run: Run, s3_server: Any, bucket: str, objects: dict[str, bytes]) -> Any:
    s3_server.put_objects(bucket, objects)
    trial = s3_server.upload_folder(DATA / "vanishing", bucket, "job/debug-output")
    return run(
        env={
            "base_trial": trial,
            "source_s3_uri": f"s3://{bucket}/pkg/",
            "rule_to_invoke": "GradientTooSmall",
            "threshold": "0.00001",
        }
    )


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "key",
    ["pkg/../../escaped.py", "pkg/../escaped.py", "pkg//tmp/escaped.py", "pkg/a/../../../x.py"],
)
def test_traversal_keys_are_refused_and_nothing_is_written_outside(
    run: Run, tmp_path: Path, s3_server: Any, s3_bucket: str, key: str
) -> None:
    """A key with '..' or an absolute path: exit 2 naming the key, nothing written anywhere.
    The S3 client (obstore) cannot even list such a key, so the message is its listing's
    (the whole key, and that it cannot be read) rather than the download's own check."""
    before = _files(tmp_path)
    result = _evaluate(
        run, s3_server, s3_bucket, {"pkg/my_rules.py": CUSTOM_RULE.encode(), key: b"x = 1\n"}
    )
    assert result.returncode == 2, result.stdout + result.stderr
    message = run.result()["message"]
    own_check = repr(key[len("pkg/") :]) in message and "outside the download folder" in message
    listing = f"the key {key} under" in message and "cannot be read" in message
    assert own_check or listing, message
    written = {p for p in _files(tmp_path) - before if "escaped" in p.name or p.name == "x.py"}
    assert written == set()
    assert not Path("/tmp/escaped.py").exists()
    leftovers = list((run.out / ".sagemaker-ignore").glob("rule-source-*"))
    assert leftovers == []


def test_folder_markers_are_skipped_and_the_rule_runs(
    run: Run, s3_server: Any, s3_bucket: str
) -> None:
    """The S3 console's zero-byte 'folder/' keys are skipped; the rule and its helper load."""
    code = CUSTOM_RULE.replace(
        "import numpy as np", "import numpy as np\nfrom helpers.scale import THRESHOLD_SCALE"
    )
    result = _evaluate(
        run,
        s3_server,
        s3_bucket,
        {
            "pkg/": b"",
            "pkg/helpers/": b"",
            "pkg/my_rules.py": code.encode(),
            "pkg/helpers/scale.py": b"THRESHOLD_SCALE = 1.0\n",
        },
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert run.message() == FIRED.format(rule="GradientTooSmall", step=8)


def test_too_long_key_is_a_client_error(run: Run, s3_server: Any, s3_bucket: str) -> None:
    """A key whose file name is longer than the file system allows: exit 2 naming the key."""
    long_name = "a" * 300 + ".py"
    result = _evaluate(
        run,
        s3_server,
        s3_bucket,
        {"pkg/my_rules.py": CUSTOM_RULE.encode(), f"pkg/{long_name}": b"x = 1\n"},
    )
    assert result.returncode == 2, result.stdout + result.stderr
    message = run.result()["message"]
    assert long_name in message and "name too long" in message.lower()


def test_stale_source_folder_is_cleaned_and_nothing_else(
    run: Run, s3_server: Any, s3_bucket: str
) -> None:
    """A rule-source-* folder left by a killed run is removed at start; other files stay."""
    scratch = run.out / ".sagemaker-ignore"
    stale = scratch / "rule-source-killed"
    (stale / "GradientTooSmall" / "rule_source").mkdir(parents=True)
    (stale / ".in-use").write_bytes(b"")  # its lock died with its process
    (stale / "GradientTooSmall" / "rule_source" / "my_rules.py").write_text("x = 1\n")
    old = scratch / "rule-source-older-version"  # no lock file: judged by its age
    old.mkdir()
    past = time.time() - 3600
    os.utime(old, (past, past))
    keep = scratch / "notes.txt"
    keep.write_text("mine\n")
    result = _evaluate(run, s3_server, s3_bucket, {"pkg/my_rules.py": CUSTOM_RULE.encode()})
    assert result.returncode == 1, result.stdout + result.stderr
    assert not stale.exists() and not old.exists()
    assert keep.read_text() == "mine\n"
    assert list(scratch.glob("rule-source-*")) == []


def test_a_folder_in_use_is_never_cleaned(tmp_path: Path) -> None:
    """A folder another running evaluator holds (its lock taken) survives a cleanup."""
    with source_folder(str(tmp_path)) as folder:
        assert folder.name.startswith("rule-source-")
        assert remove_stale_source_folders(tmp_path) == []
        assert folder.exists()
    assert not folder.exists()
