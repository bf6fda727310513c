"""GradientNormSpike: a gradient norm far above its recent level, for some logged values in a
row."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import step_in_mode
from evaluator.rules.kit.params import Param
from evaluator.rules.kit.selection import TensorSelection, scalar
from evaluator.rules.rule import Rule
from rules_builtin._spike_verdict import judge_value
from rules_builtin._spikes import Definition, SpikeSeries, definition_from, spike_parameters
from rules_builtin.registry import register

__all__ = ["GradientNormSpike"]

TRAIN = ModeKeys.TRAIN
# Ours for gradient norms, which swing far more than losses: the median of the last 20; a
# spike is >= 5 x it and > 4 robust spreads above it, 2 values in a row (bench/STABILITY.md).
DEFAULT = Definition(20, "median", factor=5.0, sigmas=4.0, patience=2, warmup=5)
# A logged total gradient norm: Hugging Face's grad_norm, Lightning's grad_2.0_norm_total,
# OLMo-core's "total grad norm", Megatron's grad-norm.
TOTAL = re.compile(r"(^|[/_ .-])grad(ient)?[_ -]?norm([_ -]?total)?$|grad_[\d.]+_norm_total$|"
                   r"total[_ -]grad(ient)?[_ -]norm", re.I)  # fmt: skip
GLOBAL_NORM = "gradients (global L2 norm)"


@register
class GradientNormSpike(Rule):
    """Fires at a step where a gradient norm has been at or above its *spike bound* for
    ``patience`` logged values in a row; the same detector and definitions as LossSpike
    (``rules_builtin._spikes``), with defaults of its own.

    Tensors: the logged total gradient norm when the trial holds one (a scalar in the
    ``gradients`` collection named like ``grad_norm`` — Hugging Face's ``train/grad_norm`` —,
    Lightning's ``grad_2.0_norm_total``, or ``total grad norm``); each is a series. Otherwise
    the global L2 norm of the ``gradients`` collection at each step that saved gradients:
    the square root of the sum of the squared L2 norms of its tensors (from their saved
    ``l2`` reductions or values; on a TensorBoard log, from their histograms), as
    ``torch.nn.utils.clip_grad_norm_`` computes it. ``collection_names`` / ``tensor_regex``
    select other tensors: scalars are each a series, the rest are pooled into one global norm.
    Values of ``mode`` only (TRAIN; a trial without modes counts as training).

    Definitions: as LossSpike's (``megatron``: ``>= 10 x`` the largest of the first 100
    values, which Megatron-LM applies to losses; ``llm_foundry``: ``>= 2 x`` the mean of the
    last 100, 5 in a row; ``olmo``: ``> mean + 6`` standard deviations of the last 128, which
    OLMo-core applies to ``optim/total grad norm`` too; ``lightning``: Fabric's loss test,
    ``rtol`` 2 over the running mean of 10). ``default`` (ours): reference the median of the
    last 20 values, a spike at least ``factor`` 5 times it AND more than ``sigmas`` 4 robust
    spreads of the run's own log-changes above it, 2 values in a row, after 5 values. Gradient
    norms of healthy fine-tunes swing by 10 to 1000 times between logged values (fp16 loss
    scaling, small batches): a ×20 jump within a run's own range is not told from its noise
    (bench/STABILITY.md). A NaN or infinite norm is above the bound (NonFiniteValues names it).

    Evidence and diagnosis: as LossSpike's (the norm and its bound charted; ``logged values
    in a row at or above the spike bound`` against ``patience``; how long the spike lasted,
    whether the norm came back, the spike rate).
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections of gradients (default: gradients)."),
        Param("tensor_regex", None, "list", "Regular expressions of gradient norms to check."),
        *spike_parameters("gradient norms", DEFAULT),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        definition: str = "default",
        window: str | None = None,
        reference: str | None = None,
        factor: str | None = None,
        sigmas: str | None = None,
        patience: str | None = None,
        warmup: str | None = None,
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(
            name, collection_names, tensor_regex, default_collections=["gradients"]
        )
        self.definition = definition_from(
            name,
            DEFAULT,
            definition,
            window=window,
            reference=reference,
            factor=factor,
            sigmas=sigmas,
            patience=patience,
            warmup=warmup,
        )
        self.spike_series: dict[str, SpikeSeries] = {}

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        found = step_in_mode(self.base_trial, step)
        if found is None:
            return False
        raw_mode, mode_step = found
        fired = False
        for series, value, later in self._norms(step, raw_mode, mode_step):
            at = {"mode": TRAIN, "mode_step": mode_step, "later": later}
            fired = judge_value(self, step, series, value, what="gradient norm", **at) or fired
        return fired

    def _norms(
        self, step: int, mode: ModeKeys, mode_step: int
    ) -> list[tuple[str, float, Callable[[], Iterator[tuple[int, float]]]]]:
        """(series, value, later values) of the norms saved at ``step``."""
        trial = self.base_trial
        names = self.selection.names(trial, step=step)
        scalars, pooled = [], []
        for name in names:
            value = _read(trial, name, step)
            if value is None:
                continue
            if value.size == 1 and (self.selection.given or TOTAL.search(name)):
                scalars.append((name, float(value.reshape(-1)[0])))
            elif value.size > 1 or not self.selection.given:
                pooled.append(name)
        if scalars:
            return [(n, v, _later(trial, [n], mode, mode_step, pool=False)) for n, v in scalars]
        if not pooled:
            return []
        total = _global_norm(trial, pooled, step)
        if total is None:
            return []
        return [(GLOBAL_NORM, total, _later(trial, pooled, mode, mode_step, pool=True))]


def _read(trial: Any, name: str, step: int) -> np.ndarray | None:
    """The tensor's value at ``step``, or its saved L2 norm as a 2-element marker array
    (a tensor saved as reductions or a histogram); None if neither is there."""
    tensor = trial.tensor(name)
    try:
        return np.asarray(tensor.value(step), dtype=np.float64)
    except TensorUnavailableForStep as e:
        if not e.has_reductions:
            return None
    try:
        l2 = float(tensor.reduction_value(step, "l2"))
    except (TensorUnavailableForStep, ValueError, KeyError):
        return None
    return np.array([l2, math.nan])  # pooled as a norm (see _norm_of)


def _norm_of(value: np.ndarray) -> float:
    if value.size == 2 and math.isnan(value[1]):  # a saved L2 norm
        return float(value[0])
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.einsum("i,i->", value.reshape(-1), value.reshape(-1))))


def _global_norm(trial: Any, names: list[str], step: int) -> float | None:
    total, found = 0.0, False
    for name in names:
        value = _read(trial, name, step)
        if value is None:
            continue
        norm = _norm_of(value)
        total += norm * norm
        found = True
    return math.sqrt(total) if found else None


def _later(
    trial: Any, names: list[str], mode: ModeKeys, after: int, *, pool: bool
) -> Callable[[], Iterator[tuple[int, float]]]:
    """The (mode step, norm) logged after mode step ``after``, lazily."""

    def values() -> Iterator[tuple[int, float]]:
        steps = sorted({s for n in names for s in trial.tensor(n).steps(mode=mode) if s > after})
        for s in steps:
            g = trial.global_step(mode, s) if mode != ModeKeys.GLOBAL else s
            if g is None:
                continue
            if pool:
                total = _global_norm(trial, names, g)
            else:
                found = _read(trial, names[0], g)
                total = None if found is None else scalar(found)
            if total is not None:
                yield s, total

    return values
