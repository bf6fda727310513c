"""The batch's trials: each argument is a trial, or a folder / prefix whose sub-folders are.

A location is a trial when it holds ``collections/`` or ``index/`` (or ``training_job_end.ts``);
otherwise each sub-folder that is a trial, or that holds one in ``debug-output/`` (SageMaker's
``<output_path>/<job>/debug-output``), is one, and the others (a ``rule-output`` folder, say)
are skipped. Any registered scheme's prefix expands (``evaluator.storage.folders``): S3's with
a delimiter, one LIST request per folder looked at, never the trial's objects.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evaluator.config.trial_list import parse_trial_list, trial_names
from evaluator.config.values import check_location
from evaluator.errors import ConfigurationError
from evaluator.fileio import UnsafeFile, read_capped
from evaluator.storage.folders import Folders

__all__ = ["TRIALS_FILE_LIMIT", "Trial", "find_trials"]

#: The largest ``--trials-file`` read: 16 MiB, some 150,000 trial locations.
TRIALS_FILE_LIMIT = 16 << 20

_MARKERS = ("collections", "index")
_END_MARKER = "training_job_end.ts"
_SAGEMAKER_FOLDER = "debug-output"


@dataclass(frozen=True)
class Trial:
    """One job's trial and the name of its output folder."""

    name: str
    location: str


def find_trials(arguments: Sequence[str], trials_files: Sequence[str] = ()) -> list[Trial]:
    """Every trial the arguments and list files name, in order, with distinct names."""
    given = list(arguments)
    for name in trials_files:
        given += parse_trial_list(_read_list(name))
    if not given:
        raise ConfigurationError(
            "no trial given: name trials (folders or s3:// prefixes), a folder or prefix whose "
            "sub-folders are trials, or --trials-file FILE"
        )
    lister = Folders()
    found: list[str] = []
    for argument in given:
        found += _expand(lister, check_location("TRIAL", argument.strip()))
    unique = list(dict.fromkeys(found))
    return [Trial(n, t) for n, t in zip(trial_names(unique), unique)]


def _read_list(name: str) -> str:
    """The text of a ``--trials-file``: a regular file (a link to one is followed) of at most
    ``TRIALS_FILE_LIMIT`` bytes; a FIFO, a device (``/dev/zero``), a folder or a larger file
    is a ConfigurationError naming it, never a hang or gigabytes read."""
    try:
        data = read_capped(os.path.realpath(name), TRIALS_FILE_LIMIT, shown=name)
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, UnsafeFile) as e:
        raise ConfigurationError(f"cannot read --trials-file {name!r}: {e}") from None


def _join(location: str, name: str) -> str:
    return location.rstrip("/") + "/" + name


def _is_trial(folders: Iterable[str], files: Iterable[str]) -> bool:
    return any(m in folders for m in _MARKERS) or _END_MARKER in files


def _expand(lister: Folders, location: str) -> list[str]:
    folders, files = lister.children(location)
    if _is_trial(folders, files):
        return [location]
    found = []
    for name in sorted(folders):
        sub = _join(location, name)
        sub_folders, sub_files = lister.children(sub)
        if _is_trial(sub_folders, sub_files):
            found.append(sub)
        elif _SAGEMAKER_FOLDER in sub_folders:
            inner = _join(sub, _SAGEMAKER_FOLDER)
            if _is_trial(*lister.children(inner)):
                found.append(inner)
    if not found:
        raise ConfigurationError(
            f"{location} is not a trial (no collections/ or index/ in it) and none of its "
            f"{len(folders)} sub-folder(s) is one: give trials, or the folder that holds them"
        )
    return found
