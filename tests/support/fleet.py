"""Many small trials for the batch tests, their single runs, and what to compare.

``write_fleet(folder, count)`` writes ``count`` trials with ``TrialWriter``, in four kinds that
cycle: a gradient that vanishes at a step that varies, a clean run, a NaN gradient at a step
that varies, and a trial without gradients (VanishingGradient has nothing to check: Error).
Every fourth trial sits in SageMaker's layout, ``<job>/debug-output``. ``single_runs`` runs the
``rule-evaluator`` command once per trial (two at a time) and returns each result file.
``comparable`` keeps what a batch must reproduce of a result file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter

__all__ = ["RULES", "FleetTrial", "comparable", "live_trial", "single_runs", "write_fleet"]

ROOT = Path(__file__).resolve().parents[2]
RULES = "VanishingGradient,ExplodingTensor"
STEPS = 6


class FleetTrial:
    """One trial of the fleet: its folder, the name its outputs get, and its kind."""

    def __init__(self, path: Path, name: str, kind: str) -> None:
        self.path, self.name, self.kind = path, name, kind


def _write(path: Path, kind: str, index: int) -> None:
    writer = TrialWriter(path)
    collections = [Collection("losses", tensor_names={"loss"})]
    if kind != "no_gradients":
        collections.append(Collection("gradients", include_regex=["^gradients/"]))
    writer.write_collections(collections)
    special = 1 + index % (STEPS - 1)
    rng = np.random.default_rng(index)
    for step in range(STEPS):
        tensors: dict[str, Any] = {"loss": np.float32(1.0 / (step + 1))}
        if kind != "no_gradients":
            grad = rng.uniform(0.5, 1.0, (3, 3)).astype(np.float32)
            if kind == "vanishing" and step >= special:
                grad *= np.float32(1e-12)
            if kind == "nan" and step == special:
                grad[1, 1] = np.nan
            tensors["gradients/dense/kernel"] = grad
        writer.write_step(step, tensors, mode=ModeKeys.TRAIN)
    writer.end_training()


def write_fleet(folder: Path, count: int) -> list[FleetTrial]:
    """``count`` trials under ``folder`` (see the module docstring)."""
    kinds = ("vanishing", "clean", "nan", "no_gradients")
    trials = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        job = f"job-{i:03d}"
        path = folder / job / "debug-output" if i % 4 == 1 else folder / job
        _write(path, kind, i)
        trials.append(FleetTrial(path, job, kind))
    return trials


def _run(trial: str, output: Path, opt_ml: Path, env: Mapping[str, str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "container.cli", "--trial-dir", trial, "--rule", RULES]
    command += ["--output-dir", str(output)]
    done = subprocess.run(
        command,
        cwd=ROOT,
        env={**env, "EVALUATOR_OPT_ML": str(opt_ml)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads((output / "rule_evaluation_result.json").read_text())
    assert result["exit_code"] == done.returncode, done.stdout + done.stderr
    return dict(result)


def single_runs(
    trials: Sequence[tuple[str, str]], folder: Path, env: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """{name: result file} of one ``rule-evaluator`` run per (name, trial), two at a time."""
    base = dict(os.environ if env is None else env)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_run, trial, folder / name, folder / "opt_ml" / name, base)
            for name, trial in trials
        }
    return {name: future.result() for name, future in futures.items()}


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a batch job must reproduce of a single run's result file: the verdicts, steps,
    messages and evidence counts (not times, paths or the trial's spelling)."""
    rules = []
    for rule in result["rules"]:
        evidence = rule.get("evidence") or {}
        rules.append(
            {
                "rule": rule["rule"],
                "status": rule["status"],
                "exit_code": rule["exit_code"],
                "step": rule["step"],
                "fired_steps": rule["fired_steps"],
                "steps_evaluated": rule["steps_evaluated"],
                "details": rule["details"],
                "comparisons": evidence.get("comparisons"),
                "tensors_checked": evidence.get("tensors_checked"),
            }
        )
    return {
        "status": result["status"],
        "exit_code": result["exit_code"],
        "message": result["message"],
        "rules": rules,
    }


def live_trial(folder: Path) -> Path:
    """A trial still being written (three clean steps, no end marker)."""
    writer = TrialWriter(folder)
    writer.write_collections([Collection("gradients", include_regex=["^gradients/"])])
    for step in range(3):
        writer.write_step(step, {"gradients/w": np.full(4, 0.5, np.float32)}, mode=ModeKeys.TRAIN)
    return folder
