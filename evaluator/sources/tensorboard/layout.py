"""How a TensorBoard log folder maps onto a trial: its runs and their phase folders, and the
collections its tag names fall into (docs/tensorboard.md). Pure functions of names, no I/O."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import structlog

from evaluator.errors import ClientError
from evaluator.formats.collections_file import Collection
from evaluator.formats.tensorboard.summary import phase_of_folder, phase_of_tag
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
_V = TypeVar("_V")
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
    # tag -> (tensor name, its phase word's mode), for tags read with a phase word (filled
    # as tags appear); None when phase words in tags are not used (``tensorboard_tag_phases``)
    tag_phases: dict[str, tuple[str, ModeKeys]] | None = None

    def describe(self) -> str:
        folders = ", ".join(f"{f or '.'} -> {m}" for f, m in sorted(self.folders.items()))
        steps = (
            "global step = 2 x event step (+1 for EVAL), mode step = event step"
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


class TagCollections:
    """The trial's collections, filled as tags appear: ``DEFAULT_COLLECTIONS`` with the user's
    (``tensorboard_collections``) replacing those of the same name, plus ``scalars`` and
    ``histograms``. A collection's name set is replaced (``publish``, once per scan), never
    grown in place, so readers in
    other threads never see it change under them.

    Tags are filed under their tensor names: where phase words are used, a tag with one
    (``train/loss``, ``Loss/test``, ``val_loss``: ``phase_of_tag``) is the tensor without it,
    in the word's mode. ``tag_phases`` True or False sets it; None (auto) decides once, by
    ``decide`` before the run's first step is handed on: when some tag seen by then has one."""

    def __init__(
        self, overrides: Mapping[str, list[str]] | None, *, tag_phases: bool | None = None
    ) -> None:
        self.specs: dict[str, list[str]] = {**DEFAULT_COLLECTIONS, **(overrides or {})}
        self.collections: dict[str, Collection] = {}
        self._patterns: list[tuple[Collection, list[re.Pattern[str]]]] = []
        for name, patterns in self.specs.items():
            collection = self.collections[name] = Collection(name)
            self._patterns.append((collection, [re.compile(p, re.IGNORECASE) for p in patterns]))
        for name in ("scalars", "histograms"):
            self.collections[name] = Collection(name)
        self._known: dict[str, str] = {}  # tag -> kind
        self._pending: dict[str, tuple[Collection, set[str]]] = {}  # filed, not yet published
        #: None until decided (``tag_phases`` None: auto); True or False once decided or set.
        self.uses_tag_phases: bool | None = tag_phases
        self.decided = False
        #: tag -> (tensor name, mode) of every tag seen with a phase word.
        self.tag_phases: dict[str, tuple[str, ModeKeys]] = {}

    def add(self, tag: str, kind: str) -> None:
        """File ``tag`` (a ``scalar``, ``histogram`` or ``tensor``) in its collections."""
        if tag in self._known:
            return
        self._known[tag] = kind
        if self.late_phase_word(tag):
            log.warning(
                "tensorboard_tag_phase_ignored",
                tag=tag,
                reason="the run's first steps had no tag with a phase word, so this tag is a "
                "tensor of its own; set tensorboard_tag_phases true (or reopen the trial) to "
                "read it by its phase word",
            )
        if self.uses_tag_phases is not False:
            found = phase_of_tag(tag)
            if found is not None:
                self.tag_phases[tag] = found
        self._file(self.tensor_name(tag), kind)

    def tensor_name(self, tag: str) -> str:
        """The tensor a tag's values belong to."""
        if self.uses_tag_phases is False:
            return tag
        found = self.tag_phases.get(tag)
        return tag if found is None else found[0]

    def decide(self) -> bool:
        """Decide (once) whether phase words in tags are used: as set, or (auto) when a tag
        seen so far has one; tags seen later are read the same way."""
        if self.uses_tag_phases is None:
            self.uses_tag_phases = bool(self.tag_phases)
        self.decided = True
        return self.uses_tag_phases

    def late_phase_word(self, tag: str) -> bool:
        """Whether ``tag`` has a phase word that is not used because the run was decided
        without phase words (auto) before it appeared."""
        return self.decided and self.uses_tag_phases is False and phase_of_tag(tag) is not None

    def split(
        self, data: dict[str, _V], mode: ModeKeys, own_folder: bool
    ) -> list[tuple[ModeKeys, dict[str, _V]]]:
        """A step's values of one folder (``mode``) by mode, under their tensor names: a tag's
        phase word gives its mode in the run's own folder; a phase folder's mode wins."""
        phases = self.tag_phases
        if not phases or not self.uses_tag_phases:
            return [(mode, data)]
        parts: dict[ModeKeys, dict[str, _V]] = {}
        for tag, value in data.items():
            found = phases.get(tag)
            if found is None:
                parts.setdefault(mode, {})[tag] = value
            else:
                parts.setdefault(found[1] if own_folder else mode, {})[found[0]] = value
        return list(parts.items())

    def publish(self) -> None:
        """Give each collection the names filed since the last call: one new set per
        collection that gained any (replacing the set per name made filing N tags cost N**2)."""
        pending, self._pending = self._pending, {}
        for collection, names in pending.values():
            collection.tensor_names = collection.tensor_names | names

    def _file(self, name: str, kind: str) -> None:
        joined: set[str] = set()
        for collection, patterns in self._patterns:
            excluded = _EXCLUSIVE.get(collection.name, ())
            if any(p.search(name) for p in patterns) and not joined & set(excluded):
                joined.add(collection.name)
                self._later(collection, name)
        if kind != "tensor":
            self._later(self.collections["histograms" if kind == "histogram" else "scalars"], name)

    def _later(self, collection: Collection, name: str) -> None:
        found = self._pending.get(collection.name)
        if found is None:
            found = self._pending[collection.name] = (collection, set())
        found[1].add(name)
