"""The spike detector LossSpike and GradientNormSpike share: one series of logged values, a
reference level from the values before, a bound above it, and ``patience`` values in a row
above the bound.

A *definition* (``Definition``) fixes how: the reference (``mean``, ``median`` or ``max`` of
the last ``window`` values), the bound (``factor`` times the reference, ``sigmas`` spreads
above it, or Lightning's relative difference ``rtol``), ``patience``, the ``warmup`` values
skipped, and two details the frameworks differ in: whether checks wait for a full window, and
whether a value above the bound joins the window. ``DEFINITIONS`` holds the frameworks' own
settings (checked against their source, 2026-11; the rules' docstrings cite them).

The spread behind ``sigmas``: with ``reference=mean`` the population standard deviation of the
window (OLMo-core's); with ``median``, a robust, multiplicative one: 1.4826 times the median
absolute deviation of the changes of ``log(value)`` between consecutive values over the last
``NOISE_VALUES`` values (divided by the square root of 2), so a steady fall does not count as
noise and a noisy run's bound widens with its own noise; the bound is then
``reference * exp(sigmas * spread)``.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace

from evaluator.errors import ConfigurationError
from evaluator.rules.kit.params import Param, parse_float, parse_int

__all__ = [
    "DEFINITIONS",
    "NOISE_VALUES",
    "Check",
    "Definition",
    "SpikeSeries",
    "definition_from",
    "spike_parameters",
]

NOISE_VALUES = 50  # values the robust (median) spread is measured over
REFERENCES = ("mean", "median", "max")


@dataclass(frozen=True)
class Definition:
    """How a spike is told (module docstring). 0 switches ``factor``/``sigmas``/``rtol`` off."""

    window: int
    reference: str
    factor: float = 0.0
    sigmas: float = 0.0
    rtol: float = 0.0
    patience: int = 1
    warmup: int = 0
    full_window: bool = False  # checks start once the window is full
    keep_spikes: bool = False  # values above the bound join the window
    frozen: bool = False  # max: sampled from the first ``window`` values, then fixed
    min_values: int = 3  # values the window holds before checks start

    def describe(self) -> str:
        tests = []
        if self.factor:
            tests.append(f"{self.factor:g} x the {self.reference}")
        if self.sigmas:
            tests.append(f"the {self.reference} + {self.sigmas:g} spreads")
        if self.rtol:
            tests.append(f"{self.rtol:g} x the {self.reference} above it")
        return (
            f"{' and '.join(tests)} of the {'first' if self.frozen else 'last'} {self.window} "
            f"values, for {self.patience} value(s) in a row"
        )


DEFINITIONS: dict[str, Definition] = {
    # Megatron-LM's rerun state machine: |loss| >= 10 x the largest |loss| of the first 100.
    "megatron": Definition(100, "max", factor=10.0, full_window=True, frozen=True),
    # llm-foundry's KillLossSpike: loss >= 2 x the mean of the last 100, 5 times in a row.
    "llm_foundry": Definition(
        100, "mean", factor=2.0, patience=5, full_window=True, keep_spikes=True
    ),
    # OLMo-core's StabilityMonitorCallback: value > mean + 6 std of the last 128.
    "olmo": Definition(128, "mean", sigmas=6.0, full_window=True, keep_spikes=True),
    # Lightning Fabric's SpikeDetection: |loss - running mean of 10| >= 2 x that mean.
    "lightning": Definition(10, "mean", rtol=2.0, warmup=1, min_values=1),
}


def spike_parameters(what: str, default: Definition) -> tuple[Param, ...]:
    """The parameters of a spike rule, after its selection ones; None means "the
    definition's value"."""
    return (
        Param(
            "definition",
            "default",
            "str",
            f"default (ours for {what}), megatron, llm_foundry, olmo or lightning: the "
            "settings the parameters below start from.",
        ),
        Param(
            "window", None, "int", f"Values the reference is taken from (default {default.window})."
        ),
        Param(
            "reference",
            None,
            "str",
            f"mean, median or max of the window (default {default.reference}).",
        ),
        Param(
            "factor",
            None,
            "float",
            f"A spike is at least this many times the reference; 0: off (default {default.factor:g}).",
        ),
        Param(
            "sigmas",
            None,
            "float",
            f"... and more than this many spreads above it; 0: off (default {default.sigmas:g}).",
        ),
        Param(
            "patience",
            None,
            "int",
            f"Fire after this many logged values in a row above the bound (default "
            f"{default.patience}).",
        ),
        Param(
            "warmup",
            None,
            "int",
            f"Logged values skipped before checking (default {default.warmup}).",
        ),
    )


def definition_from(
    rule: str, default: Definition, definition: object, **given: object
) -> Definition:
    """The definition named (``default`` for "default"), with the parameters given."""
    name = str(definition or "default").strip().lower()
    if name == "default":
        base = default
    elif name in DEFINITIONS:
        base = DEFINITIONS[name]
    else:
        choices = ", ".join(["default", *DEFINITIONS])
        raise ConfigurationError(
            f"{rule} parameter definition must be one of {choices}, got {definition!r}"
        )
    changes: dict[str, object] = {}
    for key in ("window", "patience", "warmup"):
        if given.get(key) is not None:
            changes[key] = parse_int(rule, key, given[key], minimum=1 if key != "warmup" else 0)
    for key in ("factor", "sigmas"):
        if given.get(key) is not None:
            changes[key] = parse_float(rule, key, given[key], minimum=0)
    reference = given.get("reference")
    if reference is not None:
        text = str(reference).strip().lower()
        if text not in REFERENCES:
            raise ConfigurationError(
                f"{rule} parameter reference must be mean, median or max, got {reference!r}"
            )
        changes["reference"] = text
    found = replace(base, **changes)  # type: ignore[arg-type]
    if not (found.factor or found.sigmas or found.rtol):
        raise ConfigurationError(f"{rule}: factor and sigmas are both 0: nothing tells a spike")
    return found


@dataclass(frozen=True)
class Check:
    """One logged value judged: its bound and reference (None before checks start)."""

    value: float
    reference: float | None
    bound: float | None
    spread: float | None
    above: bool
    run: int  # values in a row above the bound, this one included
    checked: int  # values checked so far
    spikes: int  # values above the bound so far
    episodes: int  # runs of values above the bound so far


@dataclass
class SpikeSeries:
    """The detector's state for one series (values fed in step order)."""

    definition: Definition
    window: deque[float] = field(init=False)
    noise: deque[float] = field(init=False)
    seen: int = 0
    run: int = 0
    checked: int = 0
    spikes: int = 0
    episodes: int = 0
    previous: float | None = None  # the last value that joined the window (Lightning)
    sampled: float | None = None  # the frozen max (Megatron)

    def __post_init__(self) -> None:
        self.window = deque(maxlen=self.definition.window)
        self.noise = deque(maxlen=NOISE_VALUES)

    def feed(self, value: float) -> Check:
        d = self.definition
        self.seen += 1
        reference, bound, spread = self._bound()
        if reference is None or self.seen <= d.warmup:
            self._keep(value)
            return Check(
                value, None, None, None, False, 0, self.checked, self.spikes, self.episodes
            )
        self.checked += 1
        above = not math.isfinite(value) or self._above(value, reference, bound)
        self.run = self.run + 1 if above else 0
        if above:
            self.spikes += 1
            self.episodes += self.run == 1
        if not above or (d.keep_spikes and math.isfinite(value)):
            self._keep(value)
        return Check(value, reference, bound, spread, above, self.run, self.checked,
                     self.spikes, self.episodes)  # fmt: skip

    def _above(self, value: float, reference: float, bound: float | None) -> bool:
        d = self.definition
        if d.frozen:
            value = abs(value)
        if d.rtol:  # Lightning: a rise on the last value, and far enough from the mean
            rising = self.previous is None or value > self.previous
            return rising and abs(value - reference) >= d.rtol * abs(reference)
        if bound is None:
            return False
        return value >= bound if not d.sigmas or d.factor else value > bound

    def _bound(self) -> tuple[float | None, float | None, float | None]:
        """(reference, bound, spread) from the values before; Nones while too few."""
        d = self.definition
        values = list(self.window)
        if d.frozen:  # Megatron-LM: the first ``window`` values are sampled, not checked
            if self.seen <= d.window or self.sampled is None:
                return None, None, None
            return self.sampled, d.factor * self.sampled, None
        if len(values) < (d.window if d.full_window else max(d.min_values, 1)):
            return None, None, None
        reference = _reference(values, d.reference)
        bounds = []
        spread: float | None = None
        if d.factor and reference > 0:  # a ratio to a level of 0 or below means nothing
            bounds.append(d.factor * reference)
        if d.sigmas:
            if d.reference == "median":
                spread = _log_spread(list(self.noise))
                if spread is not None and reference > 0:
                    bounds.append(reference * math.exp(d.sigmas * spread))
            else:
                spread = statistics.pstdev(values)
                if spread < 1e-10:  # OLMo-core: no spike on a flat window
                    return reference, None, spread
                bounds.append(reference + d.sigmas * spread)
        if d.rtol:
            bounds.append(reference + d.rtol * abs(reference))
        return reference, max(bounds) if bounds else None, spread

    def _keep(self, value: float) -> None:
        if not math.isfinite(value):
            return
        d = self.definition
        if d.frozen:
            if self.seen <= d.window:
                self.sampled = max(self.sampled or 0.0, abs(value))
            return
        self.window.append(value)
        self.noise.append(value)
        self.previous = value


def _reference(values: list[float], how: str) -> float:
    if how == "median":
        return float(statistics.median(values))
    if how == "max":
        return max(values)
    return math.fsum(values) / len(values)


def _log_spread(values: list[float]) -> float | None:
    if len(values) < 3 or min(values) <= 0:
        return None
    changes = [math.log(b / a) for a, b in zip(values, values[1:], strict=False)]
    middle = statistics.median(changes)
    return 1.4826 * statistics.median(abs(c - middle) for c in changes) / math.sqrt(2)
