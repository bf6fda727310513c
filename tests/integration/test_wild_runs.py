"""Real Hugging Face Trainer runs that strangers published (shared/data/wild-hf-dev): with
default parameters, the rules stay quiet on healthy runs (a firing diagnosed ``converged`` is a
stop signal, not a false alarm) and catch the overfit, diverged and not-learning runs with the
matching diagnosis at or after the fault's onset (bench/FALSE_ALARMS.md has the whole table).

The runs are read where they are, in ``shared/`` beside the checkout (never copied into the
repository); without them the test skips, loudly, except in CI, where they must be there."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support.real_runs import MATCHING, WILD, Verdict, judge_log, wild_labels

# The rules that read a Trainer's TensorBoard log (the others check nothing there).
RULES = [
    "ExplodingTensor",
    "LossNotDecreasing",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "UnchangedTensor",
]
# At most 5 % of the healthy runs with a firing not diagnosed converged (issue 35).
MOST_ALARMS = 0.05
# Measured: 8 of the 10 faults (whisper-finetune's training loss rose with its validation loss
# at the firing, read as diverging; lyric-generator diverges 22 steps before its labelled
# onset, a windowed blow-up measure, and is read as diverging there).
FEWEST_CAUGHT = 8


@pytest.fixture(scope="module")
def verdicts() -> list[tuple[dict[str, Any], dict[str, Verdict]]]:
    labels = wild_labels()
    if not labels:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the wild runs are missing from {WILD} (shared/ beside the checkout)")
        pytest.skip(f"SKIPPED LOUDLY: no wild runs at {WILD} (shared/ beside the checkout)")
    return [(lab, judge_log(WILD / "tb" / lab["id"], RULES)) for lab in labels]


def test_healthy_runs_fire_no_alarm(
    verdicts: list[tuple[dict[str, Any], dict[str, Verdict]]],
) -> None:
    """At most 5 % of the healthy runs get a firing whose diagnosis is not converged."""
    healthy = [(lab, v) for lab, v in verdicts if lab["judgement"] == "healthy"]
    alarms = {
        lab["id"]: {rule: v.cell for rule, v in found.items() if not v.converged_or_quiet()}
        for lab, found in healthy
    }
    alarms = {run: cells for run, cells in alarms.items() if cells}
    assert len(alarms) <= round(MOST_ALARMS * len(healthy)), alarms


def test_faults_are_caught_with_the_matching_diagnosis(
    verdicts: list[tuple[dict[str, Any], dict[str, Verdict]]],
) -> None:
    """Overfit, diverged and not-learning runs get a firing at or after their onset whose
    diagnosis names the fault."""
    faults = [(lab, v) for lab, v in verdicts if lab["judgement"] in MATCHING]
    caught, missed = [], {}
    for lab, found in faults:
        onset = lab.get("fault_onset_step") or 0
        wanted = MATCHING[lab["judgement"]]
        if any(
            v.firing and v.firing.diagnosis == wanted and v.firing.step >= onset
            for v in found.values()
        ):
            caught.append(lab["id"])
        else:
            missed[lab["id"]] = {r: v.cell for r, v in found.items() if v.firing}
    assert len(caught) >= FEWEST_CAUGHT, missed


def test_a_sparse_healthy_log_never_says_not_learning_early(
    verdicts: list[tuple[dict[str, Any], dict[str, Verdict]]],
) -> None:
    """No firing on a healthy run logged less often than every step says not_learning in its
    first tenth (the old reading compared one noisy logged value with the next and fired at
    step 30 of 48,000). A loss logged at every step keeps AWS's windows."""
    early = {}
    for lab, found in verdicts:
        if lab["judgement"] != "healthy" or lab["last_step"] <= lab["n_train"]:
            continue
        for rule, v in found.items():
            if v.firing and v.firing.diagnosis == "not_learning":
                if v.firing.step < 0.1 * lab["last_step"]:
                    early[(lab["id"], rule)] = v.cell
    assert early == {}
