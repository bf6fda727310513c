"""``HeldValueReader``: values a source decoded once and holds in memory (TensorBoard logs).

The same reader interface as ``ValueReader`` (what ``Tensor`` and batch reads call), with the
index entries pointing into a ``ValueStore`` instead of event-file bytes: no bytes are kept,
nothing is decoded twice, and nothing waits on storage (a value exists once its index does).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.trial.entries import FileIndex
from evaluator.trial.reader import Reading, ValueReader

__all__ = ["HeldValueReader", "ValueStore"]


class ValueStore:
    """The values a TensorBoard trial serves, decoded once and held: ``(key, position) ->
    value`` in per-file lists. Index entries point at (key, position, 1). A value held as a
    Python ``float`` is a float32 scalar (TensorBoard's ``simple_value``): it is given as a
    0-d float32 array; anything else as the array of what is held."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._files: dict[str, list[Any]] = {}

    def append(self, key: str, values: list[Any]) -> int:
        """Add ``values`` at the end of ``key``; returns the position of the first."""
        held = self._files.get(key)
        if held is None:
            held = self._files[key] = []
        start = len(held)
        held.extend(values)
        return start

    def get(self, key: str, position: int) -> np.ndarray | None:
        """The value at ``position`` of ``key`` as a new array, None if there is none."""
        held = self._files.get(key)
        if held is None or not 0 <= position < len(held):
            return None
        value = held[position]
        if type(value) is float:  # a simple_value scalar, held as a Python float
            return np.array(value, np.float32)
        return np.array(value)

    def clear(self) -> None:
        self._files.clear()


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
