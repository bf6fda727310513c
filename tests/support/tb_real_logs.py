"""Every built-in rule, with DEFAULT parameters, on every TensorBoard run written by the real
writers (``tests/fixtures/tb_logs``, made by ``tools/make_tb_logs``): how each rule ended, as
the evaluator ends it (a rule that checked nothing ends "Insufficient information"), and the
values TensorBoard's own ``EventAccumulator`` shows for each tag, with the tensor and mode the
trial reads them as."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import ConfigurationError, InsufficientInformationForRuleInvocation
from evaluator.formats.tensorboard.summary import phase_of_folder, phase_of_tag
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing, nothing_checked_error
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.support.builtin_rules import build_default

__all__ = [
    "ROOT",
    "RUNS",
    "RUN_FOLDERS",
    "Verdict",
    "folder_of_runs",
    "labels",
    "run_rules",
    "tag_sources",
]

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "tb_logs"
RUNS = sorted(p.name for p in ROOT.iterdir() if (p / "labels.json").is_file())

#: ``folder_of_runs``: run folder under the folder -> its job's name in ``rule-evaluator batch``
RUN_FOLDERS = {
    "hf_overfit": "hf_overfit",
    "lightning_overfit/lightning_logs/version_0": "lightning_overfit_lightning_logs_version_0",
    "torch/overfit": "torch_overfit",
    "tbx_nan": "tbx_nan",
}

# Rules that need a parameter no default gives (they end before reading anything).
NEEDS_PARAMETERS = {"SimilarAcrossRuns": "needs other_trials"}


@dataclass
class Verdict:
    """How one rule ended on one run: ``fired`` (with ``evidence`` firings recorded),
    ``quiet`` (it checked something and found no issue), ``insufficient`` (with the message
    the evaluator gives), or a ``note`` (needs parameters, error)."""

    status: str
    fired_steps: list[int] = field(default_factory=list)
    evidence: int = 0
    message: str = ""

    @property
    def cell(self) -> str:
        if self.status == "fired":
            return f"fires at step {self.fired_steps[0]}"
        return self.status


def labels(run: str) -> dict[str, Any]:
    return json.loads((ROOT / run / "labels.json").read_text())


def _open(run: str) -> Any:
    return create_trial(str(ROOT / run), idle_scans_to_complete=1, poll_interval=0.05)


def run_rules(run: str, workdir: Path | None = None) -> dict[str, Verdict]:
    """``{rule: Verdict}`` for every built-in rule on ``run``."""
    out = Path(workdir or tempfile.mkdtemp(prefix="tb-real-"))
    trial = _open(run)
    try:
        return {rule: _verdict(rule, trial, out / rule) for rule in registry.names()}
    finally:
        trial.close()


def _verdict(rule: str, trial: Any, out: Path) -> Verdict:
    if rule in NEEDS_PARAMETERS:
        return Verdict(NEEDS_PARAMETERS[rule])
    try:
        instance = build_default(rule, trial, out)
    except ConfigurationError as e:
        return Verdict("needs parameters", message=str(e))
    try:
        result = invoke_rule(instance, raise_eval_cond=False)
    except InsufficientInformationForRuleInvocation as e:
        return Verdict("insufficient", message=str(e))
    if checked_nothing(instance, result):
        visited = result.steps_evaluated + result.steps_skipped
        return Verdict(
            "insufficient", message=str(nothing_checked_error(instance, steps_visited=visited))
        )
    if result.fired_steps:
        firings = sum(len(instance.evidence.firings_at(s)) for s in result.fired_steps)
        return Verdict("fired", list(result.fired_steps), firings)
    return Verdict("quiet")


def tag_sources(run: str) -> list[tuple[Path, ModeKeys | None]]:
    """Every folder of ``run`` holding event files, with its phase (None: the run's own)."""
    folder = ROOT / run
    found = sorted({p.parent for p in folder.rglob("events.out.tfevents.*")})
    roots = [f for f in found if phase_of_folder(f.name) is None]
    return [(f, None if f in roots else phase_of_folder(f.name)) for f in found]


def tensor_of(
    tag: str, folder_phase: ModeKeys | None, phase_words: bool
) -> tuple[str, ModeKeys | None]:
    """The tensor and mode a tag is read as (docs/tensorboard.md), with ``phase_words`` when
    some tag of the run has one; mode None: the run's own folder's."""
    found = phase_of_tag(tag) if phase_words else None
    if found is None:
        return tag, folder_phase
    return found[0], folder_phase if folder_phase is not None else found[1]


def folder_of_runs(root: Path) -> Path:
    """``root/runs``: real writers' runs (Hugging Face and Lightning idioms, torch's ``train/``
    and ``val/``; copied with their times: finished logs) and a tensorboardX run with phase
    folders whose validation loss turns NaN at step 12 (``RUN_FOLDERS``)."""
    from tests.support.tb_logs import torch_style

    runs = root / "runs"
    shutil.copytree(ROOT / "hf_overfit", runs / "hf_overfit")
    shutil.copytree(ROOT / "lightning_overfit", runs / "lightning_overfit")
    shutil.copytree(ROOT / "torch_overfit", runs / "torch" / "overfit")
    train = [(s, 1.0 / (s + 1)) for s in range(30)]
    torch_style(runs / "tbx_nan" / "train", scalars={"loss": train})
    val = [(s, math.nan if s >= 12 else 1.1 / (s + 1)) for s in range(30)]
    torch_style(runs / "tbx_nan" / "validation", scalars={"loss": val})
    return runs
