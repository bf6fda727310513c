"""``HeldValueReader``: values a source decoded once and holds in memory (TensorBoard logs).

The same reader interface as ``ValueReader`` (what ``Tensor`` and batch reads call), with the
index entries pointing into a ``ValueStore`` instead of event-file bytes: no bytes are kept,
nothing is decoded twice, and nothing waits on storage (a value exists once its index does).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.trial.entries import FileIndex
from evaluator.trial.reader import Reading, ValueReader
from evaluator.trial.tb_source import ValueStore

__all__ = ["HeldValueReader"]


class HeldValueReader(ValueReader):
    """Reads values from ``store``; the rest (caches, reductions) as ``ValueReader``."""

    store: ValueStore

    def read_in(
        self, file: FileIndex, i: int, name: str, step: int, mode: ModeKeys, copy: bool = True
    ) -> np.ndarray:
        value = self.store.get(file.event_key, file.starts[i])
        if value is None:
            raise TensorUnavailableForStep(name, step, mode)
        return value

    def read_value(
        self,
        location: tuple[str, int, int],
        what: Reading,
        layout: Hashable = None,
        span: tuple[int, int] | None = None,
    ) -> np.ndarray:
        value = self.store.get(location[0], location[1])
        if value is None:
            raise TensorUnavailableForStep(*what)
        return value
