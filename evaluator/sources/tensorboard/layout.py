"""How a TensorBoard log folder maps onto a trial: its runs and their phase folders, and the
collections its tag names fall into (docs/tensorboard.md). Pure functions of names, no I/O."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import structlog

from evaluator.errors import ClientError
from evaluator.formats.metric_names import DEFAULT_COLLECTIONS, TagCollections
from evaluator.formats.tensorboard.summary import phase_of_folder
from evaluator.modes import ModeKeys

__all__ = [
    "DEFAULT_COLLECTIONS",
    "TagCollections",
    "TensorBoardMapping",
    "choose_run",
    "find_runs",
]

log = structlog.get_logger("evaluator.trial")

_MOST_SHOWN = 12
_HPARAMS_FOLDER = re.compile(r"^\d+(\.\d+)?$")


@dataclass
class TensorBoardMapping:
    """How a TensorBoard log was mapped (shown by ``summary`` and ``evaluation_started``)."""

    run: str  # the run's folder, relative to the trial ("" for the trial's own folder)
    runs: list[str]  # every run found
    folders: dict[str, str]  # folder (relative to the trial) -> mode name
    phases: bool  # global step = 2 * step (+1 for EVAL); else global step = step
    collections: dict[str, list[str]]
    # tag -> (tensor name, its phase word's mode), for tags read with a phase word (filled
    # as tags appear); None when phase words in tags are not used (``tensorboard_tag_phases``)
    tag_phases: dict[str, tuple[str, ModeKeys]] | None = None

    def describe(self) -> str:
        folders = ", ".join(f"{f or '.'} -> {m}" for f, m in sorted(self.folders.items()))
        steps = (
            "steps shown as logged, with their mode (mode step = event step; the rules' "
            "global step = 2 x event step, +1 for EVAL)"
            if self.phases
            else "global step = event step"
        )
        text = f"run {self.run or '.'}; folders {folders}; {steps}; tags are tensor names"
        if self.tag_phases is None:
            return text + " (phase words in tags not used)"
        if not self.tag_phases:
            return text
        shown = sorted(self.tag_phases.items())
        said = ", ".join(f"{t} -> {n} ({m.name})" for t, (n, m) in shown[:_MOST_SHOWN])
        more = f" and {len(shown) - _MOST_SHOWN} more" if len(shown) > _MOST_SHOWN else ""
        return f"{text}, less their phase word: {said}{more}"


def find_runs(keys: Iterable[str]) -> dict[str, dict[str, ModeKeys | None]]:
    """run folder -> {folder with event files: its phase (None for the run's own folder)}, from
    the keys of the event files. A folder named by a number inside a folder with event files
    is torch's ``add_hparams`` output, not a run: left out."""
    folders = sorted({posixpath.dirname(k) for k in keys})
    runs: dict[str, dict[str, ModeKeys | None]] = {}
    with_files = set(folders)
    for folder in folders:
        if _HPARAMS_FOLDER.match(posixpath.basename(folder)) and (
            posixpath.dirname(folder) in with_files
        ):
            continue  # torch's add_hparams writes its summary into <run>/<time.time()>/
        phase = phase_of_folder(posixpath.basename(folder)) if folder else None
        run = posixpath.dirname(folder) if phase is not None else folder
        runs.setdefault(run, {})[folder] = phase
    return runs


def choose_run(runs: Mapping[str, object], wanted: str | None, uri: str) -> str:
    """The run to read: ``wanted`` (``tensorboard_run``), else the only one; a ClientError
    naming the runs otherwise."""
    names = sorted(runs)
    if wanted is not None:
        run = wanted.strip("/")
        if run not in runs:
            raise ClientError(
                f"--tensorboard-run {wanted!r} is not a run of {uri}: its runs "
                f"are {', '.join(r or '.' for r in names)}"
            )
        return run
    if len(runs) == 1:
        return names[0]
    shown = ", ".join(r or "." for r in names[:20])
    raise ClientError(
        f"{uri} holds {len(runs)} TensorBoard runs ({shown}): point the trial at one run's "
        "folder, or choose one with --tensorboard-run NAME (tensorboard_run in RuleParameters "
        "or a config file, EVALUATOR_TENSORBOARD_RUN)"
    )
