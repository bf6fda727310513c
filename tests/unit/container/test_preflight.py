"""The command's first moments: the output folder check, where matplotlib's cache goes, and
the log format of an early error (issue 26, frictions 4 and 9)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from container import preflight
from evaluator.errors import ClientError


def test_a_missing_output_folder_is_made_and_left_clean(tmp_path: Path) -> None:
    """A folder that does not exist yet is created; the write check leaves nothing in it."""
    folder = tmp_path / "a" / "b"
    preflight.check_output_folder(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_an_output_folder_under_a_file_is_a_client_error(tmp_path: Path) -> None:
    """A folder that cannot be made is a ClientError naming it and --output-dir."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ClientError, match="--output-dir") as error:
        preflight.check_output_folder(blocker / "out")
    assert str(blocker / "out") in str(error.value)


def test_matplotlib_cache_goes_to_a_temporary_folder_of_this_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder is in the temporary folder, not in the output."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    folder = preflight.matplotlib_folder(tmp_path / "out")
    assert folder.startswith(str(tmp_path / "tmp")) and Path(folder).is_dir()


def test_without_a_usable_temporary_folder_the_cache_goes_to_sagemaker_ignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only container without /tmp falls back to the output's .sagemaker-ignore."""

    def none() -> str:
        raise FileNotFoundError(2, "No usable temporary directory found")

    monkeypatch.setattr(tempfile, "gettempdir", none)
    folder = preflight.matplotlib_folder(tmp_path / "out")
    assert folder == str(tmp_path / "out" / ".sagemaker-ignore" / "matplotlib")


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        (["--log-format", "console"], {}, "console"),
        (["--log_format=console"], {}, "console"),
        ([], {"LOG_FORMAT": "console"}, "console"),
        (["--log-format", "bogus"], {}, "json"),
    ],
)
def test_early_log_format_is_read_leniently(
    argv: list[str], environ: dict[str, str], expected: str
) -> None:
    """The format asked for by flag or environment; an unknown one falls back (not a tty)."""
    assert preflight.early_log_format(argv, environ) == expected
