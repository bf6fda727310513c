"""How a metric's name maps onto a trial, for every format of named scalar series (TensorBoard
tags, MLflow metric keys): its phase word (``train/loss``, ``val_loss``: the tensor ``loss``
of TRAIN or EVAL), the phase a folder or run name gives (``train``, ``validation``), and the
collections names fall into (``losses``, ``gradients`` ...). One place, so that a run logged
to TensorBoard and to MLflow maps the same way (docs/tensorboard.md, docs/mlflow.md). Pure
functions of names, no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

import structlog

from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys

__all__ = [
    "DEFAULT_COLLECTIONS",
    "MAX_PHASED_STEP",
    "TagCollections",
    "phase_of_folder",
    "phase_of_tag",
]

log = structlog.get_logger("evaluator.trial")

#: The largest step a run with phases can hold: its global step is ``2 * step + 1`` (EVAL),
#: which must fit in an int64. A value at a larger step is left out, as a data problem.
MAX_PHASED_STEP = (1 << 62) - 1

_V = TypeVar("_V")

_TRAIN_NAMES = frozenset({"train", "training"})
_EVAL_NAMES = frozenset({"validation", "val", "valid", "eval", "evaluation", "test", "testing"})
_TOKEN = re.compile(r"[^A-Za-z0-9]+")


def phase_of_folder(name: str) -> ModeKeys | None:
    """TRAIN for a folder named like ``train``/``training``, EVAL for ``validation``, ``val``,
    ``eval``, ``test`` (also as the last word of a name: ``loss_train``, ``loss_val``, the
    folders torch's ``add_scalars`` makes); None for any other folder (a run of its own)."""
    words = [w for w in _TOKEN.split(name.lower()) if w]
    if not words:
        return None
    if words[-1] in _TRAIN_NAMES or words[0] in _TRAIN_NAMES:
        return ModeKeys.TRAIN
    if words[-1] in _EVAL_NAMES or words[0] in _EVAL_NAMES:
        return ModeKeys.EVAL
    return None


def _phase_word(word: str) -> ModeKeys | None:
    word = word.lower()
    if word in _TRAIN_NAMES:
        return ModeKeys.TRAIN
    if word in _EVAL_NAMES:
        return ModeKeys.EVAL
    return None


def phase_of_tag(tag: str) -> tuple[str, ModeKeys] | None:
    """The tensor name and mode a tag's phase word gives, None for a tag without one.

    A phase word (those of ``phase_of_folder``) is taken from, in this order: the first path
    component (``train/loss``, ``eval/loss``: Hugging Face's Trainer), the last one
    (``Loss/train``, ``Loss/test``: PyTorch's tutorial), or the first or last word of the last
    component, split at ``_`` or ``-`` (``train_loss``, ``val_loss``: Lightning modules;
    ``loss_val``). The word and its separator are removed; a tag that would be left empty
    keeps no phase. Lightning's ``_step`` suffix (``self.log(..., on_step=True,
    on_epoch=True)`` logs ``train_loss_step`` and ``train_loss_epoch``) is removed after a
    phase word: the per-step series is the tensor (``loss``), the per-epoch one stays apart
    (``loss_epoch``)."""
    parts = tag.split("/")
    if len(parts) > 1:
        phase = _phase_word(parts[0])
        if phase is not None:
            return "/".join(parts[1:]), phase
        phase = _phase_word(parts[-1])
        if phase is not None:
            return "/".join(parts[:-1]), phase
    head, last = parts[:-1], parts[-1]
    for pattern, word, rest in ((_FIRST_WORD, 1, 2), (_LAST_WORD, 2, 1)):
        found = pattern.match(last)
        phase = _phase_word(found.group(word)) if found is not None else None
        if found is not None and phase is not None:
            name = found.group(rest)
            if word == 1 and name.endswith(_LIGHTNING_STEP) and len(name) > len(_LIGHTNING_STEP):
                name = name[: -len(_LIGHTNING_STEP)]
            return "/".join([*head, name]), phase
    return None


_LIGHTNING_STEP = "_step"


_FIRST_WORD = re.compile(r"^([A-Za-z]+)[_-](.+)$")
_LAST_WORD = re.compile(r"^(.+)[_-]([A-Za-z]+)$")


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
