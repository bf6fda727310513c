"""How a TensorBoard log folder maps onto a trial: its runs and their phase folders, and the
collections its tag names fall into (docs/tensorboard.md). Pure functions of names, no I/O."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from evaluator.errors import ClientError
from evaluator.formats.collections_file import Collection
from evaluator.formats.tb_summary import phase_of_folder
from evaluator.modes import ModeKeys

__all__ = [
    "DEFAULT_COLLECTIONS",
    "TagCollections",
    "TensorBoardMapping",
    "choose_run",
    "find_runs",
]

_HPARAMS_FOLDER = re.compile(r"^\d+(\.\d+)?$")

#: Collections made from tag names (``re.search``, case-insensitive), in this order; a tag
#: in ``gradients`` is never also in ``weights`` or ``biases``.
DEFAULT_COLLECTIONS: dict[str, list[str]] = {
    "losses": [r"loss"],
    "gradients": [
        r"(^|[/._])grads?([/._]|$)",
        r"gradients?([/._]|$)",
        r"grad_norm",
        r"grad_[0-9.]+_norm",
    ],
    "biases": [r"bias"],
    "weights": [r"weight", r"kernel"],
    "metrics": [r"acc", r"precision", r"recall", r"(^|[/._])f1", r"auc", r"mae", r"mse", r"iou"],
}
_EXCLUSIVE = {"weights": ("gradients", "biases"), "biases": ("gradients",)}


@dataclass
class TensorBoardMapping:
    """How a TensorBoard log was mapped (shown by ``summary`` and ``evaluation_started``)."""

    run: str  # the run's folder, relative to the trial ("" for the trial's own folder)
    runs: list[str]  # every run found
    folders: dict[str, str]  # folder (relative to the trial) -> mode name
    phases: bool  # global step = 2 * step (+1 for EVAL); else global step = step
    collections: dict[str, list[str]]

    def describe(self) -> str:
        folders = ", ".join(f"{f or '.'} -> {m}" for f, m in sorted(self.folders.items()))
        steps = (
            "global step = 2 x event step (+1 for EVAL), mode step = event step"
            if self.phases
            else "global step = event step"
        )
        return f"run {self.run or '.'}; folders {folders}; {steps}; tags are tensor names"


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
                f"tensorboard_run={wanted!r} is not a run of {uri}: its runs "
                f"are {', '.join(r or '.' for r in names)}"
            )
        return run
    if len(runs) == 1:
        return names[0]
    shown = ", ".join(r or "." for r in names[:20])
    raise ClientError(
        f"{uri} holds {len(runs)} TensorBoard runs ({shown}): point the trial at one run's "
        "folder, or choose one with tensorboard_run (EVALUATOR_TENSORBOARD_RUN)"
    )


class TagCollections:
    """The trial's collections, filled as tags appear: ``DEFAULT_COLLECTIONS`` with the user's
    (``tensorboard_collections``) replacing those of the same name, plus ``scalars`` and
    ``histograms``. A collection's name set is replaced, never grown in place, so readers in
    other threads never see it change under them."""

    def __init__(self, overrides: Mapping[str, list[str]] | None) -> None:
        self.specs: dict[str, list[str]] = {**DEFAULT_COLLECTIONS, **(overrides or {})}
        self.collections: dict[str, Collection] = {}
        self._patterns: list[tuple[Collection, list[re.Pattern[str]]]] = []
        for name, patterns in self.specs.items():
            collection = self.collections[name] = Collection(name)
            self._patterns.append((collection, [re.compile(p, re.IGNORECASE) for p in patterns]))
        for name in ("scalars", "histograms"):
            self.collections[name] = Collection(name)
        self._known: set[str] = set()

    def add(self, tag: str, kind: str) -> None:
        """File ``tag`` (a ``scalar``, ``histogram`` or ``tensor``) in its collections."""
        if tag in self._known:
            return
        self._known.add(tag)
        joined: set[str] = set()
        for collection, patterns in self._patterns:
            excluded = _EXCLUSIVE.get(collection.name, ())
            if any(p.search(tag) for p in patterns) and not joined & set(excluded):
                joined.add(collection.name)
                collection.tensor_names = collection.tensor_names | {tag}
        if kind != "tensor":
            coll = self.collections["histograms" if kind == "histogram" else "scalars"]
            coll.tensor_names = coll.tensor_names | {tag}
