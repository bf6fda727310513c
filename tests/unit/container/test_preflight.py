"""The command's first moments: the output folder check, and
the log format of an early error (issue 26, frictions 4 and 9)."""

from __future__ import annotations

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
