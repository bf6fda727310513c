"""``Tensor``: smdebug's Tensor API (values, reductions, shapes, steps, workers) for one name."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from evaluator.engine.columns import Column
from evaluator.engine.view import TrialView
from evaluator.errors import (
    ShapeUnavailableForStep,
    SMDebugNotImplementedError,
    TensorUnavailableForStep,
)
from evaluator.formats.histogram import Histogram
from evaluator.modes import ModeKeys

if TYPE_CHECKING:
    from evaluator.trial.trial import Trial

__all__ = ["Tensor"]

GLOBAL = ModeKeys.GLOBAL
MiB = 1024 * 1024


class Tensor:
    """One saved tensor of a trial. Get it with ``trial.tensor(name)``.

    ``trial`` is kept for smdebug's ``tensor.trial``; everything else goes through ``view``, the
    part of the trial a Tensor may use: its values are the trial's ``ValueStore``'s, whatever
    the format."""

    def __init__(self, name: str, trial: Trial, cache: bool = False, *, view: TrialView) -> None:
        self.name = name
        self.trial = trial
        self.cache = cache
        self._view = view
        values = view.values
        assert values is not None
        self._values = values
        self._read = values.value_of(name)  # the hot path: the store's reader of the name

    def __repr__(self) -> str:
        return f"<Tensor name={self.name!r} trial={self.trial.name!r}>"

    @property
    def original_name(self) -> str | None:
        return self._values.original_name(self.name)

    # ---------------------------------------------------------------- values

    def value(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> np.ndarray:
        """The saved array at ``step_num`` (a global step for GLOBAL, else a mode step).

        With no ``worker``, the lexically first worker that saved the step is used.
        """
        return self._read(step_num, mode, worker)

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> Any:
        """A reduction (min, max, mean, std, variance, sum, prod, l1, l2) at ``step_num``:
        the saved one if the hook saved it, else computed from the raw tensor."""
        return self._values.reduction_value(
            self.name, step_num, (reduction_name, abs), mode, worker
        )

    def reduction_values(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], Any]:
        """Every *saved* reduction at ``step_num``, keyed by ``(name, abs)`` (a logged
        histogram's buckets and count are not reductions: see ``histogram``)."""
        return self._values.reduction_values(self.name, step_num, mode, worker)

    def histogram(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> Histogram:
        """Ours, for logged histograms (TensorBoard's): the histogram at ``step_num`` (its
        exact ``min``, ``max``, ``count``, ``sum`` and ``sum_squares`` where logged, and its
        ``buckets``, ``[k, 3]`` rows of left edge, right edge, count; see
        ``evaluator.formats.histogram.Histogram`` for the reductions and their error bound).
        ``TensorUnavailableForStep`` when the tensor is not a histogram there."""
        return self._values.histogram(self.name, step_num, mode, worker)

    def shape(
        self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> tuple[int, ...]:
        """The saved shape, else the shape of the saved value."""
        saved = self._values.saved_shape(self.name, step_num, mode, worker)
        if saved is not None:
            return saved
        try:
            return self.value(step_num, mode=mode, worker=worker).shape
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode) from None

    def values(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        return {s: self.value(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    @overload
    def column(
        self, steps: None = None, mode: ModeKeys = GLOBAL, *, max_bytes: int = ...
    ) -> Column: ...
    @overload
    def column(
        self, steps: Iterable[int], mode: ModeKeys = GLOBAL, *, max_bytes: int = ...
    ) -> Column | None: ...
    def column(
        self,
        steps: Iterable[int] | None = None,
        mode: ModeKeys = GLOBAL,
        *,
        max_bytes: int = 16 * MiB,
    ) -> Column | None:
        """Ours: the batch read of this tensor, values stacked in one array (``Column``:
        ``values[i]`` is the value at ``steps[i]``).

        Without ``steps``: every step of ``mode`` (as ``steps(mode)``), from one batch where
        the format holds one (a TensorBoard log's columns), else read step by step.
        ``HistogramValueUnavailable`` for a histogram (use ``histogram``), and
        ``TensorUnavailableForStep`` when the values differ in shape or dtype.

        With ``steps``: ``Trial.columns([name], steps, mode)``'s ``Column``, the values over a
        prefix of ``steps`` (up to ``max_bytes`` of them) read in one walk through the event
        files; None when no step gave a raw value (``evaluator.engine.columns`` says which
        steps are left out, and how reads are counted)."""
        if steps is not None:
            found = self.trial.columns([self.name], steps, mode, max_bytes=max_bytes)
            return found.get(self.name)
        whole = self._values.whole_column(self.name, mode)
        if whole is not None:
            return whole
        read = {s: self.value(s, mode=mode) for s in self.steps(mode=mode)}
        arrays = list(read.values())
        if any(a.shape != arrays[0].shape or a.dtype != arrays[0].dtype for a in arrays):
            raise TensorUnavailableForStep(self.name, next(iter(read)), mode)
        return Column(self.name, list(read), np.stack(arrays) if arrays else np.zeros(0))

    def shapes(
        self, mode: ModeKeys = GLOBAL, worker: str | None = None
    ) -> dict[int, tuple[int, ...]]:
        """``{step: shape}`` over ``steps(mode)``: documented by smdebug, missing from it."""
        return {s: self.shape(s, mode=mode, worker=worker) for s in self.steps(mode=mode)}

    def step(self, *args: Any, **kwargs: Any) -> None:
        raise SMDebugNotImplementedError(
            "step method has been removed. "
            "Please use tensor.value or tensor.reduction_value methods"
        )

    # ---------------------------------------------------------------- steps and workers

    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor was saved: global steps for GLOBAL, else mode steps."""
        self._view.refresh(self.name)
        return self._values.steps(self.name, mode, show_incomplete_steps)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = GLOBAL) -> list[int]:
        """Completed steps up to and including ``step``; the last ``n`` of them if ``n``."""
        steps = self.steps(mode=mode)
        found = steps[: bisect.bisect_right(steps, step)]
        return found[-n:] if n else found

    def workers(self, step_num: int, mode: ModeKeys = GLOBAL) -> list[str]:
        """Workers that saved this tensor at ``step_num``, in the order their files were read."""
        return self._values.workers(self.name, step_num, mode)
