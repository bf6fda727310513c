"""The command's first moments: the output folder checked before any trial is opened (a run
that cannot record its verdict must not end in a "success" nobody can read), and how an error
that comes before the configuration is known good is shown (the log format asked for; one
line on a terminal)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from evaluator.errors import ClientError

__all__ = [
    "check_output_folder",
    "early_log_format",
    "output_folder_error",
    "same_terminal",
]


def check_output_folder(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` when missing and prove this user can write in it (a file made and
    removed at once); a ``ClientError`` naming the folder, the reason and the fix otherwise."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".write-check-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as e:
        raise output_folder_error(path, e) from None


def output_folder_error(folder: str | os.PathLike[str], error: OSError) -> ClientError:
    """The ClientError for an output folder this user cannot make or write: the folder, the
    reason and the fix."""
    return ClientError(
        f"cannot write the result file to the output folder {str(folder)!r} "
        f"({error.strerror or type(error).__name__}, as user {_user()}): give --output-dir "
        "(output_dir) a folder this user can write; with docker run, create the mounted "
        'folder first (mkdir -p) and run as its owner (--user "$(id -u):$(id -g)")'
    )


def _user() -> str:
    return f"{os.geteuid()}:{os.getegid()}" if hasattr(os, "geteuid") else "this user"


def early_log_format(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The log format asked for, read leniently for an error that comes before the
    configuration is known good: ``--log-format`` (any spelling), then ``log_format`` /
    ``LOG_FORMAT``, else console on a terminal."""
    chosen = ""
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name.lower().replace("_", "-") == "--log-format":
            chosen = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    chosen = chosen or environ.get("log_format", "") or environ.get("LOG_FORMAT", "")
    chosen = chosen.strip().lower()
    if chosen in ("json", "console"):
        return chosen
    return "console" if _isatty(sys.stdout) else "json"


def same_terminal() -> bool:
    """Whether stdout and stderr both reach a terminal (a person reads both as one)."""
    return _isatty(sys.stdout) and _isatty(sys.stderr)


def _isatty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False
