"""Real Hugging Face Trainer logs (wild-hf-dev, a sibling of the checkout: ``../shared/data/
wild-hf-dev``), used where they are, and faults injected into copies written to a scratch
folder with the project's TensorBoard writer (``evaluator.testing.tb_writer``).

Used by tests/unit/rules_builtin/test_stability_on_real_runs.py and bench/stability.py. Each
fault changes the real series from ``FAULT_AT`` (a fraction of the logged values) on:

===================  ===========================================================  ==============
fault                what is written                                              rule
===================  ===========================================================  ==============
``loss_x4``          ``train/loss`` x4 for 3 logged values                        LossSpike
``grad_norm_x20``    ``train/grad_norm`` x20 for 2 logged values                  GradientNormSpike
``masked_nan``       ``train/loss`` 0.0 and ``train/grad_norm`` NaN from then on  NonFiniteValues
``lr_zero``          ``train/learning_rate`` 0 from then on                       LearningRateSchedule
``throughput_drop``  ``eval/samples_per_second`` x0.3 from then on (>= 6 evals)   ThroughputDrop
===================  ===========================================================  ==============
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.rules.loader import build_rule
from evaluator.testing.tb_writer import read_scalars, write_scalars
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.support.real_runs import WILD, wild_labels

__all__ = [
    "DATA",
    "FAULTS",
    "FAULT_AT",
    "RULES",
    "Fault",
    "Injected",
    "Outcome",
    "healthy",
    "inject",
    "judge",
    "labels",
]

DATA = WILD  # shared/data/wild-hf-dev beside the checkout
RULES = ("LossSpike", "GradientNormSpike", "NonFiniteValues", "LearningRateSchedule",
         "ThroughputDrop")  # fmt: skip
FAULT_AT = 0.6


@dataclass(frozen=True)
class Fault:
    rule: str
    tag: str  # the tag whose logged values count the lag
    scale: float  # the factor (0: the value is set to ``value``)
    lasts: int | None  # logged values changed (None: to the end)
    also: tuple[tuple[str, float], ...] = ()  # other tags set from then on (tag, value)
    min_values: int = 8


FAULTS = {
    "loss_x4": Fault("LossSpike", "train/loss", 4.0, 3),
    "grad_norm_x20": Fault("GradientNormSpike", "train/grad_norm", 20.0, 2),
    "masked_nan": Fault(
        "NonFiniteValues", "train/loss", 0.0, None, (("train/grad_norm", math.nan),)
    ),
    "lr_zero": Fault("LearningRateSchedule", "train/learning_rate", 0.0, None),
    "throughput_drop": Fault("ThroughputDrop", "eval/samples_per_second", 0.3, None, min_values=6),
}


@dataclass(frozen=True)
class Injected:
    path: Path
    at_step: int  # the first changed step (the tag's event step)
    steps: tuple[int, ...]  # the tag's logged steps, in order


@dataclass(frozen=True)
class Outcome:
    fired: tuple[int, ...]  # fired mode steps (event steps)
    checked_nothing: bool

    def lag(self, injected: Injected) -> int | None:
        """Logged values of the faulty tag from the injected one to the first firing at or
        after it (0: at it); None when it never fired there."""
        after = [s for s in self.fired if s >= injected.at_step]
        if not after:
            return None
        return sum(1 for s in injected.steps if injected.at_step <= s < after[0])


def labels() -> list[dict[str, Any]]:
    return wild_labels()


def healthy() -> list[str]:
    return sorted(r["id"] for r in labels() if r["judgement"] == "healthy")


def inject(run: str, fault: str, out: Path, *, at: float = FAULT_AT) -> Injected | None:
    """The run's log with ``fault`` injected from the fraction ``at`` of the tag's logged
    values on, written under ``out``; None when the run does not log the tag (or too few
    values of it)."""
    f = FAULTS[fault]
    scalars = read_scalars(DATA / "tb" / run)
    series = scalars.get(f.tag, [])
    if len(series) < f.min_values or any(t not in scalars for t, _ in f.also):
        return None
    i = int(len(series) * at)
    end = len(series) if f.lasts is None else i + f.lasts
    at = series[i][0]
    scalars[f.tag] = [(s, v * f.scale if f.scale else 0.0, w) if k in range(i, end) else (s, v, w)
                      for k, (s, v, w) in enumerate(series)]  # fmt: skip
    for tag, value in f.also:
        scalars[tag] = [(s, value if s >= at else v, w) for s, v, w in scalars[tag]]
    path = out / f"{run}.{fault}.{at:g}"
    write_scalars(path, scalars)  # type: ignore[arg-type]
    return Injected(path, at, tuple(s for s, _, _ in series))


def judge(path: Path, rule: str, params: dict[str, str] | None = None) -> Outcome:
    """``rule`` with ``params`` (default parameters) on the log at ``path``, as the evaluator
    runs it: its fired steps as event (mode) steps, and whether it checked nothing."""
    quiet = logging.getLogger("evaluator")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # restored: other tests read the evaluator's info lines
    trial = create_trial(str(path), idle_scans_to_complete=1, poll_interval=0.05)
    try:
        instance = build_rule(registry.lookup(rule), trial, params or {})
        result = invoke_rule(instance, raise_eval_cond=False)
        fired = tuple(m for s in result.fired_steps if (m := trial.mode_modestep(s)[1]) is not None)
        return Outcome(fired, checked_nothing(instance, result))
    finally:
        trial.close()
        quiet.setLevel(level)
