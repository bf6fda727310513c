"""How LossNotDecreasing records one comparison: the two conditions it fires on, and, where
its windows are still too short to resolve a small decrease, a fall clear of the noise.

``judge_comparison`` records both documented conditions at an evaluation (the decrease against
``diff_percent``, the rise above the lowest window against ``increase_threshold_percent``)
with their sentences and the loss's diagnosis. ``record_clear_fall`` is the noise-aware
reading's answer to a log too short for its windows (``rules_builtin._levels.LossView``'s
``needed`` values each): the means of its last two halves (at most ``needed`` values each)
are compared, and a decrease beyond the margin by ``NOISE_K`` standard errors of their
difference is a verdict ("still decreasing"), recorded and never a firing. Anything less
waits for the windows: a short noisy log is never called flat on too few values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import NOISE_K, Diagnosis
from evaluator.rules.kit.selection import percent_of
from evaluator.rules.shown_steps import step_words
from rules_builtin._cadence import RESOLUTION_PERCENT
from rules_builtin._levels import LossView, span

__all__ = ["Comparison", "judge_comparison", "record_clear_fall"]

GLOBAL = ModeKeys.GLOBAL


@dataclass(frozen=True)
class Comparison:
    """One evaluation of a loss: ``decided`` is (current, previous), each (value, first mode
    step, last mode step); ``mean`` the current window's mean; ``best`` the lowest mean
    before; ``why`` which comparison decided; ``diff`` the decrease that counts (%)."""

    name: str
    step: int
    mode: ModeKeys
    at: int  # the mode step
    decided: tuple[tuple[float, int, int], tuple[float, int, int]]
    best: float
    mean: tuple[float, int, int]
    why: str
    diff: float


def judge_comparison(rule: Any, c: Comparison) -> bool:
    """Record both conditions of ``c`` in ``rule``'s evidence; whether either is met."""
    m = c.mode.name
    (cur, *_), (prev, *_) = c.decided
    level, newest = c.mean[0], span(m, c.mean)
    where = step_words(rule.base_trial, c.step, c.mode, c.at)
    now, before = span(m, c.decided[0]), span(m, c.decided[1])
    decrease = percent_of(prev - cur, prev)
    if math.isnan(cur) or math.isnan(prev):
        decrease = -math.inf  # a NaN loss has not decreased
    elif cur == prev == 0:
        decrease = math.inf  # at 0, its floor (train-merror on data fitted): nothing to fall

    def diagnose() -> Diagnosis:
        found: Diagnosis = rule.progress.diagnose(rule.base_trial, c.name, c.mode, c.step)
        return found

    not_decreasing: bool = rule.evidence.compare(
        c.step,
        c.name,
        quantity=f"decrease (%) of the loss from {before} to {now}",
        value=decrease,
        parameter="diff_percent",
        threshold=c.diff,
        fires_when="<=",
        mode=c.mode,
        mode_step=c.at,
        sentence=lambda: (
            f"{rule.rule_name}: {c.name} did not decrease by {c.diff:g}%: "
            f"{before} was {prev:g}, {now} {cur:g} (at {where}; {c.why})"
        ),
        diagnose=diagnose,
    )
    threshold = rule.increase_threshold_percent
    risen: bool = rule.evidence.compare(
        c.step,
        c.name,
        quantity=f"rise (%) of {newest} of the loss above its lowest {m} value or mean",
        value=percent_of(level - c.best, c.best),
        parameter="increase_threshold_percent",
        threshold=threshold,
        fires_when=">",
        mode=c.mode,
        mode_step=c.at,
        sentence=lambda: (
            f"{rule.rule_name}: {newest} of {c.name} ({level:g}, at {where}) is more than "
            f"{threshold:g}% above its lowest {m} value or mean {c.best:g}"
        ),
        diagnose=diagnose,
    )
    return not_decreasing or risen


def record_clear_fall(rule: Any, name: str, view: LossView, step: int, mode: ModeKeys) -> bool:
    """Record, when there is one, a fall of the loss clear of its noise between the means of
    its last two halves (windows shorter than ``view.needed``); whether one was recorded."""
    values = [v for v in view.cadence.values if math.isfinite(v)]
    half = min(len(values) // 2, view.needed)
    if half < 2:
        return False
    prev = math.fsum(values[-2 * half : -half]) / half
    cur = math.fsum(values[-half:]) / half
    if prev == 0:
        return False
    sigma = view.cadence.noise_percent() / 100 * view.cadence.scale()
    margin = max(rule.diff_percent, RESOLUTION_PERCENT)
    bar = margin + NOISE_K * percent_of(sigma * math.sqrt(2 / half), prev)
    decrease = percent_of(prev - cur, prev)
    if not decrease > bar:
        return False
    rule.evidence.compare(
        step,
        name,
        quantity=f"decrease (%) of the loss between the means of its last two {half}-value "
        f"halves (its windows need {view.needed} values each: only a fall clear of the noise "
        "decides before)",
        value=decrease,
        parameter="diff_percent",
        threshold=bar,
        fires_when="<=",
        mode=mode,
    )
    return True
