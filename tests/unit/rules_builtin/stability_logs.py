"""Helpers of the stability rules' tests: a Hugging Face-style TensorBoard log written to disk
with the project's writer, and a rule run on it as the evaluator runs it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.rules.loader import build_rule
from evaluator.testing.tb_writer import write_scalars
from evaluator.trial import create_trial
from rules_builtin import registry

__all__ = ["Run", "log", "run"]


def log(folder: Path, series: Mapping[str, Sequence[float]], *, every: int = 10) -> Path:
    """Tag -> values logged at steps every, 2 * every, ... (as the Trainer logs them)."""
    write_scalars(
        folder,
        {
            tag: [((i + 1) * every, v) for i, v in enumerate(values)]
            for tag, values in series.items()
        },
    )
    return folder


class Run:
    """What a rule did on a log: fired mode (event) steps, firings' evidence, checked nothing."""

    def __init__(self, rule: Any, result: Any, trial: Any) -> None:
        self.rule = rule
        self.fired = [trial.mode_modestep(s)[1] for s in result.fired_steps]
        self.checks = [c for s in result.fired_steps for c in rule.evidence.firings_at(s)]
        self.nothing = checked_nothing(rule, result)


def run(folder: Path, rule: str, **params: str) -> Run:
    trial = create_trial(str(folder), idle_scans_to_complete=1, poll_interval=0.05)
    try:
        instance = build_rule(registry.lookup(rule), trial, dict(params))
        return Run(instance, invoke_rule(instance, raise_eval_cond=False), trial)
    finally:
        trial.close()
