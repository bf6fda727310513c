"""The batch's trials: each argument is a trial, or a folder / prefix that holds trials.

An argument is looked at as ``rule-evaluator watch`` looks at its root
(``container.discovery``): smdebug output (a folder holding ``collections/`` or ``index/``, or
``training_job_end.ts``), a TensorBoard run (event files, with its phase folders), or a
folder of such trials and runs, at any depth down to ``MAX_DEPTH`` (SageMaker's
``<output_path>/<job>/debug-output`` included); other folders (a ``rule-output`` folder, say)
are skipped. Any registered scheme's prefix expands (``evaluator.storage.folders``): S3's with
a delimiter, one LIST request per folder looked at, never an smdebug trial's objects.

Each trial is one job, named by its path under the folder given (``exp1/version_0`` is the job
``exp1_version_0``; a trailing ``debug-output`` is dropped), or, for an argument that is itself
a trial, as ``evaluator.config.trial_list.trial_names`` names it; names that would collide fall
back to ``trial_names``, which makes them distinct. Names are made safe by
``evaluator.config.output_paths.safe_name``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from container.discovery import MAX_DEPTH, RunFinder
from evaluator.config.output_paths import safe_name
from evaluator.config.trial_list import parse_trial_list, trial_names
from evaluator.config.values import check_location
from evaluator.errors import ConfigurationError
from evaluator.fileio import UnsafeFile, read_capped
from evaluator.storage.folders import Folders

__all__ = ["TRIALS_FILE_LIMIT", "Trial", "find_trials"]

#: The largest ``--trials-file`` read: 16 MiB, some 150,000 trial locations.
TRIALS_FILE_LIMIT = 16 << 20

_SAGEMAKER_FOLDER = "debug-output"
_PROBLEMS_SHOWN = 3


@dataclass(frozen=True)
class Trial:
    """One job's trial and the name of its output folder."""

    name: str
    location: str


@dataclass(frozen=True)
class _Found:
    location: str
    sub_path: str  # under the argument ("" for the argument itself)


def find_trials(
    arguments: Sequence[str], trials_files: Sequence[str] = (), *, skip: Path | None = None
) -> list[Trial]:
    """Every trial the arguments and list files name, in order, with distinct names; the
    folder ``skip`` (the batch's output) is never looked into."""
    given = list(arguments)
    for name in trials_files:
        given += parse_trial_list(_read_list(name))
    if not given:
        raise ConfigurationError(
            "no trial given: name trials (folders or s3:// prefixes), a folder or prefix that "
            "holds trials, or --trials-file FILE"
        )
    found: dict[str, _Found] = {}
    for argument in given:
        for one in _expand(check_location("TRIAL", argument.strip()), skip):
            found.setdefault(one.location.rstrip("/"), one)
    entries = list(found.values())
    return [Trial(n, e.location) for n, e in zip(_names(entries), entries, strict=True)]


def _read_list(name: str) -> str:
    """The text of a ``--trials-file``: a regular file (a link to one is followed) of at most
    ``TRIALS_FILE_LIMIT`` bytes; a FIFO, a device (``/dev/zero``), a folder or a larger file
    is a ConfigurationError naming it, never a hang or gigabytes read."""
    try:
        data = read_capped(os.path.realpath(name), TRIALS_FILE_LIMIT, shown=name)
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, UnsafeFile) as e:
        raise ConfigurationError(f"cannot read --trials-file {name!r}: {e}") from None


def _expand(location: str, skip: Path | None) -> list[_Found]:
    Folders().children(location)  # a location that cannot be listed: its own error, at once
    discovery = RunFinder(location, skip=skip, hidden=True, any_name=True).find()
    root = location.rstrip("/")
    runs = [
        _Found(r.location, "" if r.location.rstrip("/") == root else r.name) for r in discovery.runs
    ]
    if runs:
        return runs
    problems = "; ".join(discovery.problems[:_PROBLEMS_SHOWN])
    raise ConfigurationError(
        f"{location} is not a trial and holds none within {MAX_DEPTH} folders: no smdebug "
        "output (collections/ or index/) and no TensorBoard event files (events.out.tfevents.*)"
        f"{f' ({problems})' if problems else ''}; give trials, or the folder that holds them"
    )


def _sub_path_name(sub_path: str) -> str:
    parts = [p for p in sub_path.split("/") if p]
    if len(parts) > 1 and parts[-1] == _SAGEMAKER_FOLDER:
        parts.pop()
    return safe_name("_".join(parts))


def _names(entries: list[_Found]) -> list[str]:
    """Each entry's name: its sub-path's, else (the argument itself, or a clash) the one
    ``trial_names`` gives, which are distinct."""
    fallback = trial_names([e.location for e in entries])
    names = [_sub_path_name(e.sub_path) if e.sub_path else f for e, f in zip(entries, fallback)]
    while True:
        counts = Counter(names)
        clashing = [i for i, n in enumerate(names) if counts[n] > 1 and n != fallback[i]]
        if not clashing:
            return names
        for i in clashing:
            names[i] = fallback[i]
