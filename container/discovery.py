"""The runs under a folder or prefix, as they are now: smdebug trials and TensorBoard runs, as
``rule-evaluator watch`` (a watched root, looked at again and again) and ``rule-evaluator
batch`` (each folder of trials given) find them.

A folder holding ``collections/`` or ``index/`` (or ``training_job_end.ts``) is an smdebug
trial and is not looked into further. Folders holding
TensorBoard event files make runs as a single run reads them
(``evaluator.sources.tensorboard.layout.find_runs``): a phase folder (``train/``, ``validation/``) belongs
to the run above it, torch's ``add_hparams`` folders are left out; hidden folders are not
looked into (but by ``batch``). Any registered scheme's
prefix is walked (``evaluator.storage.folders``): S3's with one LIST per folder looked at.

A run's name is its path under the root (``exp1/run3``), which is also where its outputs go
under the watch's output folder (a batch job's folder name is made of it:
``container.batch.trials``); a name with a segment that could leave that folder (``..``)
is refused, as is anything under the output folder itself (when it sits inside the root).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.errors import ConfigurationError
from evaluator.formats.tensorboard.summary import is_event_file
from evaluator.sources.tensorboard.layout import find_runs
from evaluator.storage.folders import Folders
from evaluator.storage.schemes import is_remote

__all__ = ["MAX_DEPTH", "Discovery", "Held", "Run", "RunFinder", "in_shard", "safe_name"]

MAX_DEPTH = 8  # folders below the root looked into
_SMDEBUG_FOLDERS = ("collections", "index")
_END_MARKER = "training_job_end.ts"


@dataclass(frozen=True)
class Held:
    """Why a run that was found is listed but not evaluated (yet): the status and message
    the watch shows for it."""

    status: str
    message: str


@dataclass(frozen=True)
class Run:
    """One run: its name (its path under the root) and its location; ``title`` what its
    writer calls it, when that is not its name (an MLflow run's name); ``held`` set while it
    is not to be evaluated (an MLflow run with no metrics yet, a sweep's parent run)."""

    name: str
    location: str
    title: str | None = None
    held: Held | None = None


@dataclass
class Discovery:
    """What one look at the root found: the runs, and the folders that could not be read."""

    runs: list[Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def safe_name(name: str) -> bool:
    """Whether ``name`` (a run's path under the root) stays inside the output folder."""
    parts = name.split("/")
    return all(p not in ("", ".", "..") and "\\" not in p and "\0" not in p for p in parts)


def in_shard(name: str, shard: tuple[int, int]) -> bool:
    """Whether the run ``name`` belongs to shard ``I`` of ``N``: a hash of its name, stable
    across processes and machines."""
    index, count = shard
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count == index


class RunFinder:
    """Looks at ``root`` for runs (``find``), skipping the folder ``skip`` (the output).
    The watch skips hidden folders and refuses run paths that would leave its output folder;
    ``rule-evaluator batch`` looks into hidden folders too (``hidden``) and keeps every path
    (``any_name``): it makes a safe folder name of each (``container.batch.trials``)."""

    def __init__(
        self, root: str, *, skip: Path | None = None, hidden: bool = False, any_name: bool = False
    ) -> None:
        self._hidden, self._any_name = hidden, any_name
        url = is_remote(root) or "://" in root  # file://... is listed as given
        self._root = root.rstrip("/") if url else str(Path(root))
        self._skip = None if skip is None or url else skip.resolve()
        self._lister = Folders()

    def find(self) -> Discovery:
        found = Discovery()
        event_files: list[str] = []
        for rel, folders, files in self._walk(found):
            if _is_trial(folders, files):
                found.runs.append(self._run(rel))
                continue
            event_files += [posixpath.join(rel, f) for f in files if is_event_file(f)]
        for run in sorted(find_runs(event_files)):
            found.runs.append(self._run(run))
        if not self._any_name:
            found.runs = [r for r in found.runs if _keep(r, found)]
        return found

    def _base(self) -> str:
        """The name of a run that is the root itself: the root's last segment."""
        return posixpath.basename(self._root.rstrip("/")) or "run"

    def _run(self, rel: str) -> Run:
        return Run(rel or self._base(), self._join(rel))

    def _join(self, rel: str) -> str:
        return f"{self._root}/{rel}" if rel else self._root

    def _walk(self, found: Discovery) -> Iterator[tuple[str, set[str], set[str]]]:
        """(path under the root, its sub-folders, its files), depth first, top down; an
        smdebug trial's sub-folders are never entered."""
        stack = [("", 0)]
        while stack:
            rel, depth = stack.pop()
            location = self._join(rel)
            if self._skip is not None and Path(location).resolve() == self._skip:
                continue
            try:
                folders, files = self._lister.children(location)
            except (ConfigurationError, OSError) as e:
                found.problems.append(f"{location}: {e}")
                continue
            yield rel, folders, files
            if _is_trial(folders, files) or depth >= MAX_DEPTH:
                continue
            for name in sorted(folders, reverse=True):
                if self._hidden or not name.startswith("."):
                    stack.append((posixpath.join(rel, name), depth + 1))


def _is_trial(folders: set[str], files: set[str]) -> bool:
    """Whether a folder is an smdebug trial (its sub-folders are then never entered)."""
    return any(f in folders for f in _SMDEBUG_FOLDERS) or _END_MARKER in files


def _keep(run: Run, found: Discovery) -> bool:
    if safe_name(run.name):
        return True
    found.problems.append(f"{run.location}: a run path that would leave the output folder")
    return False
