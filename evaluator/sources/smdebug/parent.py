"""A folder given as a trial that is the parent of smdebug trials (``--trial-dir
examples/trials``, a bucket's job folder copied whole) is told at once, naming the trials it
holds, instead of waiting for collection files that will never appear at its top.

Only smdebug's layout counts here: a trial folder holds ``collections/``, ``index/``,
``events/`` or ``training_job_end.ts``. (Other kinds of trial decide for themselves.)"""

from __future__ import annotations

import os

from evaluator.errors import ConfigurationError
from evaluator.formats.keys import END_OF_JOB_KEY
from evaluator.storage.schemes import is_remote, local_path

__all__ = ["check_not_a_parent", "smdebug_trials_below"]

_MARKS = ("collections", "index", "events", END_OF_JOB_KEY)
_SHOWN = 8


def _is_smdebug_trial(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, mark)) for mark in _MARKS)


def smdebug_trials_below(folder: str) -> list[str]:
    """The smdebug trials in ``folder``'s sub-folders and their sub-folders (a job folder
    holding ``debug-output``), relative to it and sorted; [] when ``folder`` is itself a trial
    or not a readable folder."""
    if _is_smdebug_trial(folder):
        return []
    found: list[str] = []
    for child in _subfolders(folder):
        path = os.path.join(folder, child)
        if _is_smdebug_trial(path):
            found.append(child)
        else:
            found += [f"{child}/{g}" for g in _subfolders(path) if _is_smdebug_trial(f"{path}/{g}")]
    return sorted(found)


def check_not_a_parent(location: str, key: str) -> None:
    """A ``ConfigurationError`` naming the trials when the local folder ``location`` holds
    smdebug trials rather than being one; S3 URIs and trial folders pass."""
    if is_remote(location):
        return
    folder = local_path(location)
    trials = smdebug_trials_below(folder)
    if not trials:
        return
    shown = ", ".join(trials[:_SHOWN]) + (
        f" and {len(trials) - _SHOWN} more" if len(trials) > _SHOWN else ""
    )
    example = os.path.join(location, trials[0])
    how = (
        f"rule-evaluator summary {example}"
        if key.startswith("summary")
        else f"--trial-dir {example}"
    )
    raise ConfigurationError(
        f"the folder {location} ({key}) holds trials, it is not one: {shown}. Pass one of "
        f"them, e.g. {how}"
    )


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []
