"""What a spike rule records and says (LossSpike, GradientNormSpike): each value checked as
evidence, and a firing's diagnosis, which reads what the series did after it
(``rules_builtin._spikes`` tells the spikes)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import DIVERGING, Diagnosis
from rules_builtin._spikes import Check, Definition, SpikeSeries

__all__ = ["TRANSIENT", "aftermath", "diagnose_spike", "judge", "judge_value"]

TRANSIENT = "transient"  # the diagnosis of a spike the series came back from


def aftermath(
    bound: float, later: Iterable[tuple[int, float]]
) -> tuple[int, int | None, float | None]:
    """What followed a firing: (further values above ``bound``, the step it came back below
    at or None, the value there) over the values logged after it."""
    more = 0
    for step, value in later:
        if math.isfinite(value) and value < bound:
            return more, step, value
        more += 1
    return more, None, None


def diagnose_spike(
    what: str, check: Check, definition: Definition, after: tuple[int, int | None, float | None]
) -> Diagnosis:
    """``diverging`` when the series did not come back below the bound in what is logged
    (or went non-finite), else ``transient``; the figures say how long and how often."""
    more, back_step, back_value = after
    lasted = check.run + more
    figures: dict[str, float | int | str] = {
        "value": check.value,
        "reference": _round(check.reference),
        "bound": _round(check.bound),
        "window": definition.window,
        "reference_kind": definition.reference,
        "lasted_values": lasted,
        "spike_values": check.spikes,
        "values_checked": check.checked,
        "spike_rate": _round(check.spikes / check.checked if check.checked else 0.0),
        "episodes": check.episodes,
    }
    rate = f"{check.spikes} of {check.checked} values checked were above the bound ({check.episodes} episode(s))"
    if back_step is not None and math.isfinite(check.value):
        figures["back_at_step"] = back_step
        return Diagnosis(
            TRANSIENT,
            f"the {what} stayed above the bound for {lasted} logged value(s) and came back "
            f"({back_value:.4g} at step {back_step}): a transient spike; {rate}. Check the data "
            "of those steps; if spikes recur, lower the learning rate or clip gradients",
            figures,
        )
    return Diagnosis(
        DIVERGING,
        f"the {what} has stayed above the bound for {lasted} logged value(s) and has not come "
        f"back in what is logged so far: the run is diverging; {rate}. Lower the learning "
        "rate, clip gradients, or restart from a checkpoint before the spike",
        figures,
    )


def _round(x: float | None) -> float:
    if x is None:
        return math.nan
    return float(f"{x:.6g}") if math.isfinite(x) else x


def judge(
    rule: Any,
    step: int,
    tensor: str,
    check: Check,
    *,
    what: str,
    mode: ModeKeys,
    mode_step: int,
    later: Callable[[], Iterable[tuple[int, float]]],
) -> bool:
    """Record ``check`` in ``rule.evidence`` (the value and its bound as curves, and the
    comparison of the values in a row above the bound with ``patience``); True when it fires.
    ``later`` gives the (mode step, value) logged after this one, read only for a firing's
    diagnosis (what the spike did next, in what the trial holds)."""
    definition: Definition = rule.definition
    evidence = rule.evidence
    evidence.record(step, tensor, quantity=what, value=check.value, mode=mode)
    if check.bound is None or check.reference is None:
        return False
    evidence.record(
        step, tensor, quantity=f"spike bound of the {what}", value=check.bound, mode=mode
    )
    bound, reference, value = check.bound, check.reference, check.value
    where = f"{mode.name} step {mode_step}"

    def diagnose() -> Diagnosis:
        return diagnose_spike(what, check, definition, aftermath(bound, later()))

    return bool(
        evidence.compare(
            step,
            tensor,
            quantity=f"logged values in a row at or above the spike bound of the {what}",
            value=check.run,
            parameter="patience",
            threshold=definition.patience,
            fires_when=">=",
            mode=mode,
            mode_step=mode_step,
            sentence=lambda: (
                f"{rule.rule_name}: {tensor} = {value:.6g} at {where} is the {check.run}"
                f"{_ordinal(check.run)} value in a row at or above the bound {bound:.6g} "
                f"({definition.describe()}; reference {reference:.6g})"
            ),
            diagnose=diagnose,
        )
    )


def judge_value(rule: Any, step: int, series: str, value: float, **judged: Any) -> bool:
    """Feed ``value`` to the rule's series named ``series`` (``rule.spike_series``: one
    ``SpikeSeries`` of ``rule.definition`` per name, made when first fed) and ``judge`` the
    check it gives (``judged``: judge's ``what``, ``mode``, ``mode_step`` and ``later``);
    True when it fires."""
    found = rule.spike_series.get(series)
    if found is None:
        found = rule.spike_series[series] = SpikeSeries(rule.definition)
    return judge(rule, step, series, found.feed(value), **judged)


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
