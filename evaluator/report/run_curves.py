"""The run behind a rule's curves: every saved value of the loss tensors a rule watched, in
every mode the trial holds them in, read from the trial when the report's data file is
written (never while the rule runs: the rule records only what it reads, and its hot path
stays as it is). A rule reads only what its verdict needs (LossNotDecreasing stops at its
firing, follows the validation loss once that has history); the report draws the whole run
around those reads.

A long run is downsampled for drawing as TensorBoard's charts are (a bounded number of points
per series), keeping what a reader looks for: the lowest and the highest value of each of
``RUN_BUCKETS`` runs of consecutive steps (a spike or a dip is never lost between two kept
points), the first and last values, every firing step and the first value that is not finite
in each run of steps. ``count`` keeps how many values the series holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys
from evaluator.rules.kit.modes import VALIDATION_PREFIX, is_epoch_end_log
from evaluator.rules.series import json_number
from evaluator.rules.shown_steps import writer_steps

__all__ = ["RUN_BUCKETS", "RUN_QUANTITIES", "downsample", "run_curves"]

RUN_QUANTITIES = frozenset({"loss"})  # watched quantities that are the tensor's own value
RUN_BUCKETS = 1000  # runs of steps per series: at most about 2 x this many points drawn
MAX_RUN_TENSORS = 4  # loss tensors drawn per rule (each in every mode it has)
_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)


def run_curves(
    trial: Any, series: Sequence[Mapping[str, Any]], fired: Iterable[int] = ()
) -> list[dict[str, Any]]:
    """The whole-run series (``{"tensors", "quantity", "mode", "count", "points"}``, points
    ``[step, value]`` downsampled: the global step, or the step the writer logged where the
    trial shows another, ``Trial.writer_step``) of each tensor a watched series of ``series``
    follows as its own value (``RUN_QUANTITIES``), and of its ``val_`` twin (Keras), in every
    mode; ``fired`` steps (as the result file shows them) are kept exactly. Never raises: a tensor that cannot be read is
    left out (the rule's own series are still drawn)."""
    if trial is None:
        return []
    keep = {int(s) for s in fired}
    shown = writer_steps(trial)
    wanted: dict[str, str] = {}
    for s in series:
        names = s.get("tensors") or []
        quantity = str(s.get("quantity"))
        if s.get("parameter") is None and quantity in RUN_QUANTITIES and len(names) == 1:
            wanted.setdefault(str(names[0]), quantity)
    out: list[dict[str, Any]] = []
    for name, quantity in list(wanted.items())[:MAX_RUN_TENSORS]:
        twins = [name]
        try:
            if not name.startswith(VALIDATION_PREFIX) and trial.has_tensor(
                VALIDATION_PREFIX + name
            ):
                twins.append(VALIDATION_PREFIX + name)
            for tensor in twins:
                for mode, steps, values in _read(trial, tensor, keras=len(twins) > 1):
                    if shown is not None:  # the steps the writer logged
                        steps = np.array([shown(int(g)).step for g in steps], dtype=np.int64)
                    out.append(
                        {
                            "tensors": [tensor],
                            "quantity": quantity,
                            "mode": mode.name,
                            "count": len(steps),
                            "points": downsample(steps, values, keep),
                        }
                    )
        except Exception:  # a help: the rule's own reads are drawn without the run
            continue
    return out


def _read(trial: Any, name: str, *, keras: bool) -> list[tuple[ModeKeys, np.ndarray, np.ndarray]]:
    """(mode, global steps, values) of the scalar tensor ``name`` in each mode it was saved in;
    a Keras epoch-end log (the training mean at an EVAL step) is not a value of EVAL."""
    tensor = trial.tensor(name)
    found: list[tuple[ModeKeys, np.ndarray, np.ndarray]] = []
    moded: set[int] = set()
    for mode in [m for m in _MODES if m in trial.modes()] + [ModeKeys.GLOBAL]:
        steps = tensor.steps(mode=mode)
        if mode == ModeKeys.GLOBAL:  # the steps saved without a mode
            steps = [s for s in steps if s not in moded]
        if not steps:
            continue
        column = tensor.column(steps, mode, max_bytes=1 << 30)
        if column is None or not len(column.steps):
            continue
        values = np.asarray(column.values, dtype=np.float64).reshape(len(column.steps), -1)
        if values.shape[1] != 1:
            return []  # not a scalar: no curve
        glob = [s if mode == ModeKeys.GLOBAL else trial.global_step(mode, s) for s in column.steps]
        rows = [
            i
            for i, g in enumerate(glob)
            if g is not None
            and not (keras and mode == ModeKeys.EVAL and is_epoch_end_log(trial, name, g))
        ]
        moded.update(g for g in glob if g is not None)
        if rows:
            found.append(
                (mode, np.asarray([glob[i] for i in rows], dtype=np.int64), values[rows, 0])
            )
    return found


def downsample(
    steps: np.ndarray, values: np.ndarray, keep: set[int], buckets: int = RUN_BUCKETS
) -> list[list[Any]]:
    """``[[step, value], ...]`` of ``steps`` and ``values`` (step order): all of them when
    they are at most ``2 * buckets``, else the lowest and highest finite value of each of
    ``buckets`` runs, the first value not finite of each run, the first and last point and
    the ``keep`` steps."""
    n = len(steps)
    if n <= 2 * buckets:
        rows = np.arange(n)
    else:
        finite = np.isfinite(values)
        low = np.where(finite, values, np.inf)
        high = np.where(finite, values, -np.inf)
        edges = np.linspace(0, n, buckets + 1).astype(np.int64)
        chosen = [0, n - 1]
        for a, b in zip(edges[:-1], edges[1:]):
            if b <= a:
                continue
            if finite[a:b].any():
                chosen += [a + int(np.argmin(low[a:b])), a + int(np.argmax(high[a:b]))]
            if not finite[a:b].all():
                chosen.append(a + int(np.argmin(finite[a:b])))
        if keep:
            chosen += np.flatnonzero(np.isin(steps, list(keep))).tolist()
        rows = np.unique(np.asarray(chosen, dtype=np.int64))
    return [[int(steps[i]), json_number(float(values[i]))] for i in rows.tolist()]
