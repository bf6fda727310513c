"""Per-step numbers computed over a window of steps at once: the kit's one door to values.

A rule that reduces every selected tensor at every step (a mean, a variance, a norm) pays
more for one ``value()``/``reduction_value()`` call and one small numpy call per tensor and
step than for the arithmetic. ``WindowedRows`` asks the trial, when it can (the batch read
``Trial.columns``, ours), for the raw values of the selected tensors over the next saved steps
in one walk, and computes each tensor's numbers for the whole window with one numpy call over
the stacked rows. At each step the rule takes the number from there. Where the window has no
row (the trial has no batch read, as smdebug's; the job is still writing, so that a read
ahead could wait for later steps' files; a step the batch left out) the same ``compute`` runs
over that step's value alone, read with ``Tensor.value`` (``alone_dtypes``): the rule writes
its computation once, and no per-step twin of it. The numbers are the same either way, bit
for bit: numpy reduces each row of a C-contiguous stack as it reduces the same array alone
(tests/unit/rules/kit/test_windows.py). ``get`` then answers None only where there is no raw
value ``compute`` covers (not saved, a shape or saved reductions only, another dtype, empty),
which the rule decides about (its saved reductions, say). A rule whose number is a reduction
the hook may have saved (``reduction_value(step, name, abs)``) names it (``reduction``):
where the window has no row (the batch leaves out every step where the hook saved reductions
of the tensor) ``get`` answers that reduction as ``Tensor.reduction_value`` does, the saved
one where the hook saved it and the raw value's otherwise, so the rule has one path for both.

A rule that compares a step's value with earlier steps' values (UnchangedTensor) asks for
rows before each row (``before=k``): ``compute``'s result for a row may then use the ``k``
rows before it, a window keeps the last ``k`` rows of the one before it (so a window's first
steps have their history), and ``get(name, step, names, earlier=steps)`` answers the result
computed with exactly the values at ``earlier`` before ``step``'s: from the window where its
rows before ``step``'s are those steps, else over the values of ``earlier`` and ``step`` read
alone and stacked (a value of another shape, or text beside numbers, ends them there). One
computation again, the same numbers either way. Read alone, the earlier values are read the
nearest first, and with ``further`` only while it says the result can still change (each one
read is a read of the tensor, as the window's rows it uses are).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep

__all__ = ["FLOATS", "WindowedRows"]

MiB = 1024 * 1024
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_NUMBERS = "iufcb"  # dtype kinds numpy stacks together (into their common dtype)


class WindowedRows:
    """``compute(rows)`` per tensor over windows of steps; ``get(name, step, names)``.

    ``compute`` takes the stacked values of one tensor, flattened to ``(steps, elements)``
    (with ``flatten=False``: as stacked, ``(steps, *shape)``), and returns one result per row
    (an array or a list), or None for a tensor it does not cover; it is used over windows for
    the ``dtypes`` given, and over one step's value alone (where the window has no row) for
    ``alone_dtypes`` (None: every dtype). By default nothing is computed over a value alone:
    ``get`` answers None there, for a rule whose per-step answer is not ``compute``'s (one
    that prefers the hook's saved reductions, say). ``mode`` is the mode of the steps the
    rule passes (``GLOBAL``: global steps). With ``reduction`` (``(name, abs)``, the
    reduction ``compute`` computes per row) ``get`` answers, where the window has no row,
    the first element of ``reduction_value(step, name, abs=abs)`` (the hook's saved one where
    it saved it), None where the tensor has neither (a shape only) or it is empty. Empty
    values are left to the rule (None) unless ``empty``: then ``compute`` covers them too.
    ``dtypes=None``: windows of every dtype. ``before``: ``compute``'s result for a row may
    use the ``before`` rows before it (``get``'s ``earlier``)."""

    def __init__(
        self,
        trial: Any,
        compute: Callable[[np.ndarray], Any],
        *,
        mode: Any = None,
        dtypes: Iterable[np.dtype[Any]] | None = FLOATS,
        max_bytes: int = 16 * MiB,
        flatten: bool = True,
        alone_dtypes: Iterable[np.dtype[Any]] | None = (),
        reduction: tuple[str, bool] | None = None,
        empty: bool = False,
        before: int = 0,
    ) -> None:
        self._trial = trial
        self._columns = getattr(trial, "columns", None)  # ours; smdebug's trial has none
        self._compute = compute
        self._mode = mode
        self._dtypes = None if dtypes is None else frozenset(dtypes)
        self._alone = None if alone_dtypes is None else frozenset(alone_dtypes)
        self._max_bytes = max_bytes
        self._flatten = flatten
        self._reduction = reduction
        self._empty = empty
        self._before = before
        # Per tensor, the last ``before`` rows of the previous window (steps, values).
        self._kept: dict[str, tuple[list[int], np.ndarray]] = {}
        self._covered: frozenset[int] = frozenset()
        self._results: dict[str, tuple[dict[int, int], Any, list[int]]] = {}
        self._note: Callable[[str, int], None] | None = None

    def get(
        self,
        name: str,
        step: int,
        names: Iterable[str],
        earlier: Sequence[int] | None = None,
        further: Callable[[Any, int], bool] | None = None,
    ) -> Any:
        """``compute``'s result for ``name`` at ``step``: from the window that starts at
        ``step`` (read for ``names``) when ``step`` is not in the current one, else from the
        step's value alone; None when there is no raw value ``compute`` covers. A result
        handed out counts as a read of the tensor.

        With ``earlier`` (the steps whose values ``compute`` sees before ``step``'s, oldest
        first, at most ``before`` of them): the result computed with exactly those rows
        before ``step``'s, from the window where its rows before are those steps, else over
        the values of ``earlier`` and ``step`` read alone (None where one has no raw value);
        a window's result counts as a read at ``step`` and at each of ``earlier``. Read alone,
        the earlier values are read the nearest first; with ``further(result, rows)`` (the
        result over the ``rows`` newest values read so far) the next one is read only while it
        answers true (the result can still change), and that result is the answer."""
        if self._columns is not None and getattr(self._trial, "loaded_all_steps", False):
            # (A job still writing is read step by step: a read ahead could wait for event
            # files of later steps before this step is judged.)
            if step not in self._covered:
                self._load(step, names)
            found = self._results.get(name)
            row = None if found is None else found[0].get(step)
            if found is not None and row is not None:
                wanted = [] if earlier is None else list(earlier)
                if earlier is None or found[2][max(0, row - len(wanted)) : row] == wanted:
                    if self._note is not None:
                        self._note(name, step)
                        for read in reversed(wanted):  # in the order they are read alone
                            self._note(name, read)
                    return found[1][row]
        if earlier is not None:
            return self._alone_rows(name, step, earlier, further)
        return self._alone_value(name, step)

    def _alone_rows(
        self,
        name: str,
        step: int,
        earlier: Sequence[int],
        further: Callable[[Any, int], bool] | None,
    ) -> Any:
        """``compute`` over the values of ``name`` at ``earlier`` and ``step`` read alone and
        stacked, its result for ``step``; the earlier ones are read the nearest first, while
        ``further`` says the result can still change, and up to one that does not stack with
        ``step``'s (another shape, or text beside numbers: left out with those before it)."""
        tensor = self._trial.tensor(name)
        kwargs = {} if self._mode is None else {"mode": self._mode}
        try:
            last = np.asarray(tensor.value(step, **kwargs))
        except TensorUnavailableForStep:
            return None
        if (last.size == 0 and not self._empty) or (
            self._alone is not None and last.dtype not in self._alone
        ):
            return None
        numbers = last.dtype.kind in _NUMBERS
        kept = [last]  # the newest first
        for s in reversed(earlier):
            if further is not None and len(kept) > 1:
                result = self._last_row(kept)
                if result is None or not further(result, len(kept)):
                    return result
            try:
                value = np.asarray(tensor.value(s, **kwargs))
            except TensorUnavailableForStep:
                return None
            if value.shape != last.shape or (value.dtype.kind in _NUMBERS) != numbers:
                break
            kept.append(value)
        return self._last_row(kept)

    def _last_row(self, newest_first: list[np.ndarray]) -> Any:
        """``compute``'s result for the newest of values stacked oldest first."""
        rows = np.stack(newest_first[::-1])
        result = self._compute(rows.reshape(len(rows), -1) if self._flatten else rows)
        return None if result is None else result[-1]

    def _alone_value(self, name: str, step: int) -> Any:
        """``compute`` over ``name``'s value at ``step`` alone, as one row (``Tensor.value``
        reports the read); with ``reduction``, that reduction as ``reduction_value`` answers it."""
        if self._reduction is not None:
            return self._reduction_value(name, step, *self._reduction)
        if self._alone is not None and not self._alone:
            return None
        tensor = self._trial.tensor(name)
        try:
            value = (
                tensor.value(step) if self._mode is None else tensor.value(step, mode=self._mode)
            )
        except TensorUnavailableForStep:
            return None
        value = np.asarray(value)
        if (value.size == 0 and not self._empty) or (
            self._alone is not None and value.dtype not in self._alone
        ):
            return None  # (the default, no dtypes: the rule's own per-step answer)
        result = self._compute(value.reshape(1, -1) if self._flatten else value[np.newaxis])
        return None if result is None else result[0]

    def _reduction_value(self, name: str, step: int, reduction: str, is_abs: bool) -> Any:
        """The first element of ``name``'s ``reduction`` at ``step`` (saved ones have shape
        (1,)), None where there is none or it is empty."""
        tensor = self._trial.tensor(name)
        kwargs: dict[str, Any] = {"abs": is_abs}
        if self._mode is not None:
            kwargs["mode"] = self._mode
        try:
            found = np.asarray(tensor.reduction_value(step, reduction, **kwargs)).reshape(-1)
        except TensorUnavailableForStep:
            return None  # a shape only
        return found[0] if found.size else None

    def steps_before(self, name: str, step: int, count: int) -> list[int] | None:
        """The steps of the ``count`` rows before ``step``'s row in the current window (the
        rows ``compute`` saw before it), None if there are fewer or ``step`` has no row."""
        found = self._results.get(name)
        row = None if found is None else found[0].get(step)
        if found is None or row is None or row < count:
            return None
        return found[2][row - count : row]

    def note(self, name: str, step: int) -> None:
        """Count one more read of ``name`` at ``step`` (a rule that uses a window's result
        in place of several per-step reads counts each of them)."""
        if self._note is not None:
            self._note(name, step)

    def _load(self, step: int, names: Iterable[str]) -> None:
        steps = self._trial.steps() if self._mode is None else self._trial.steps(mode=self._mode)
        ahead = steps[bisect.bisect_left(steps, step) :]
        if not ahead or ahead[0] != step:
            ahead = [step]  # not a saved step as far as steps() knows: this one alone
        kwargs = {} if self._mode is None else {"mode": self._mode}
        read = self._columns
        if read is None:  # get() loads only from a trial with a batch read
            return
        window = read(names, ahead, max_bytes=self._max_bytes, **kwargs)
        self._note = window.note
        self._covered = frozenset(window.steps)
        self._results = {}
        kept, self._kept = self._kept, {}
        for name, column in window.columns.items():
            values, steps = column.values, column.steps
            if self._dtypes is not None and values.dtype not in self._dtypes:
                continue
            if self._before:
                self._kept[name] = (steps[-self._before :], values[-self._before :].copy())
                tail = kept.get(name)
                if (
                    tail is not None
                    and tail[0][-1] < steps[0]
                    and tail[1].shape[1:] == values.shape[1:]
                    and tail[1].dtype == values.dtype
                ):
                    # The previous window's last rows go before this one's first.
                    values, steps = np.concatenate([tail[1], values]), [*tail[0], *steps]
            flat = values.reshape(len(steps), -1)
            if flat.shape[1] == 0 and not self._empty:
                continue  # empty tensors: the per-step path says what they mean
            result = self._compute(flat if self._flatten else values)
            if result is None:
                continue  # not a tensor the computation covers: the per-step path decides
            rows = {s: i for i, s in enumerate(steps)}
            self._results[name] = (rows, result, steps)
