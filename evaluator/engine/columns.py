"""Batch reads for rules: the values of several tensors over a run of steps, one walk.

``Trial.columns(names, steps)`` reads the steps in order, each step's event file once, and
gives per tensor one stacked array (a row per step) of the steps it could read: what a rule
needs to compute a reduction over every step with one numpy call instead of one per step.
Reading stops once ``max_bytes`` of values are held, so a window of steps is bounded in
memory; the caller asks again from the first step not covered.

It never replaces the per-step API: a step where a tensor has no raw value (not saved, a
shape only, unreadable), a step where the hook saved reductions of it (``reduction_value``
would answer from those), and a tensor whose shape or dtype changes within the window are
left out, and the rule asks ``Tensor.value`` / ``reduction_value`` there as before. Reads are
not reported to the rule's read observer here; ``Columns.note`` reports a row when the rule
uses it, so the count of values read is the one the per-step calls would give.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from evaluator.engine.reads import note_read
from evaluator.errors import SMDebugError

__all__ = ["Column", "Columns", "read_columns"]

MiB = 1024 * 1024


class Column:
    """One tensor over the steps of a window: ``steps`` (those read) and ``values``, an
    array of shape ``(len(steps), *shape)``; ``values[i]`` is the value at ``steps[i]``."""

    __slots__ = ("name", "steps", "values", "_row")

    def __init__(self, name: str, steps: list[int], values: np.ndarray) -> None:
        self.name = name
        self.steps = steps
        self.values = values
        self._row: dict[int, int] | None = None  # made on first use

    def row(self, step: int) -> int | None:
        """The row of ``step`` in ``values``, None if it was not read in the batch."""
        if self._row is None:
            self._row = {s: i for i, s in enumerate(self.steps)}
        return self._row.get(step)


class Columns:
    """What ``Trial.columns`` read: ``steps`` covered (a prefix of the steps asked for), and a
    ``Column`` per tensor that has at least one row."""

    def __init__(self, steps: list[int], columns: dict[str, Column]) -> None:
        self.steps = steps
        self.columns = columns

    def get(self, name: str) -> Column | None:
        return self.columns.get(name)

    @staticmethod
    def note(name: str, step: int) -> None:
        """Report a row used as a read of ``name`` at ``step`` (as ``Tensor.value`` would)."""
        note_read(name, step)


def read_columns(
    steps: Sequence[int],
    names: Iterable[str],
    read: Callable[[str, int], np.ndarray | None],
    *,
    max_bytes: int = 16 * MiB,
    file_bytes: Callable[[int], int] | None = None,
    max_file_bytes: int = 0,
) -> Columns:
    """Walk ``steps`` in order, reading every name at each with ``read(name, step)`` (None,
    or an ``SMDebugError``, for no raw value), until ``max_bytes`` of values are held or,
    with ``file_bytes(step)`` (the bytes of a step's event files), before the files walked
    pass ``max_file_bytes``; at least one step is read."""
    wanted = list(dict.fromkeys(names))
    rows: dict[str, tuple[list[int], list[np.ndarray]]] = {n: ([], []) for n in wanted}
    covered: list[int] = []
    held = walked = 0
    # ``read`` works below the Tensor API, which reports reads to the rule's observer: the
    # rule hears of the rows it uses (Columns.note), not of the batch.
    for step in steps:
        if covered and held >= max_bytes:
            break
        if file_bytes is not None:
            walked += file_bytes(step)
            if covered and walked > max_file_bytes:
                break
        covered.append(step)
        for name in wanted:
            try:
                value = read(name, step)
            except SMDebugError:
                continue
            if value is None:
                continue
            got_steps, values = rows[name]
            got_steps.append(step)
            values.append(value)
            held += value.nbytes
    columns: dict[str, Column] = {}
    for name, (got_steps, values) in rows.items():
        if not values:
            continue
        first = values[0]
        if any(v.shape != first.shape or v.dtype != first.dtype for v in values):
            continue  # no one array: the per-step API answers
        columns[name] = Column(name, got_steps, np.stack(values))
    return Columns(covered, columns)
