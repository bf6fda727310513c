"""Our rule framework reproduces smdebug 1.0.34's rule runs on every trial the real smdebug wrote.

Each entry of ``golden/*.rules.json`` names a rule body (written from its ``semantics`` string in
``tests/compat/rule_bodies.py``) and records what smdebug's ``Rule`` / ``invoke_rule`` did with
it. We run the same body through our ``invoke_rule`` and compare every field. Two mappings follow
from documented differences (docs/compatibility.md, "Rules"):

* at the end of an ended trial our ``invoke_rule`` returns (``Termination.END_OF_DATA``) where
  smdebug's raised ``NoMoreData`` from the first integer step after the last saved one; so
  ``termination`` "NoMoreData" is our END_OF_DATA, and smdebug's ``last_step_tried`` is the
  last step we visited plus one;
* we visit saved steps only, so ``skipped`` could lack ``StepUnavailable`` entries for integers
  that were never saved. No golden entry has any (asserted below), so nothing is mapped.

On the ``dtypes`` trial smdebug raised ``KeyError`` reading ``dt/int16``; we decode it
("all-numpy-dtypes-decode"), and for exactly those entries our outcome is asserted explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from evaluator.errors import RuleEvaluationConditionMet, SMDebugError
from evaluator.rules import NullObserver, Termination, invoke_rule
from evaluator.trial import create_trial
from tests.compat.golden import DATA, SCENARIOS, load_golden
from tests.compat.rule_bodies import make_rule

FIELDS = ("evaluated_steps", "fired_steps", "skipped", "termination", "end_step", "last_step_tried")
CASES = [
    (scenario, name) for scenario in SCENARIOS for name in load_golden(scenario, "rules")["rules"]
]

# Our outcome where smdebug raised KeyError on dt/int16 (docs/compatibility.md,
# "all-numpy-dtypes-decode"). The trial has global steps 0, 1, 2 and every tensor at each.
INT16_READABLE = {
    # dt/zeros (3x3 zeros) at every step, and dt/scalar_0d is 0.0 at step 0.
    "AllZero_all": [0, 1, 2],
    # dt/nonfinite holds [nan, inf, -inf, 1] at every step.
    "ExplodingTensor": [0, 1, 2],
    "ExplodingTensor_only_nan": [0, 1, 2],
    # prev_steps(s, n=3) has three steps only at s=2; dt/zeros and dt/int8 never change.
    "UnchangedTensor_all": [2],
}


class Recorder(NullObserver):
    """Collects the firing steps and the skipped steps by exception class."""

    def __init__(self) -> None:
        self.fired: list[int] = []
        self.skipped: dict[str, list[int]] = {}

    def on_step_skipped(self, step: int, exc: SMDebugError) -> None:
        self.skipped.setdefault(type(exc).__name__, []).append(step)

    def on_condition_met(self, step: int, exc: RuleEvaluationConditionMet) -> None:
        self.fired.append(exc.step)


@pytest.fixture(scope="module")
def trials() -> Iterator[dict[str, Any]]:
    """Each fixture trial opened once from its local folder, as tests/compat/golden.py does."""
    opened: dict[str, Any] = {}
    yield opened
    for trial in opened.values():
        trial.close()


def trial_for(trials: dict[str, Any], scenario: str) -> Any:
    if scenario not in trials:
        trials[scenario] = create_trial(str(DATA / scenario))
    return trials[scenario]


def run_entry(trial: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """Our run of one golden entry, encoded as the golden file encodes smdebug's."""
    rule = make_rule(entry, trial)
    recorder = Recorder()
    try:
        result = invoke_rule(rule, end_step=entry["end_step"], observer=recorder)
    except Exception as e:  # the golden files record what escaped as error:<class>
        termination, last_tried = (
            f"error:{type(e).__name__}",
            rule.reached[-1] if rule.reached else None,
        )
    else:
        termination, last_tried = encode_termination(result.ended_by, result.last_step)
    return {
        "evaluated_steps": rule.reached,
        "fired_steps": recorder.fired,
        "skipped": recorder.skipped,
        "termination": termination,
        "end_step": None if trial.training_ended() else trial.last_complete_step + 1,
        "last_step_tried": last_tried,
    }


def encode_termination(ended_by: Termination, last_step: int | None) -> tuple[str, int | None]:
    """smdebug's name for how the run ended, and the last integer step smdebug tried."""
    if ended_by == Termination.END_OF_DATA:
        # smdebug went on to last_step + 1, where wait_for_steps raised NoMoreData.
        return "NoMoreData", None if last_step is None else last_step + 1
    return ended_by.value, last_step


@pytest.mark.parametrize(("scenario", "name"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_rule_run_matches_smdebug(trials: dict[str, Any], scenario: str, name: str) -> None:
    """Evaluated, fired and skipped steps, termination and end step equal smdebug's."""
    entry = load_golden(scenario, "rules")["rules"][name]
    ours = run_entry(trial_for(trials, scenario), entry)
    if scenario == "dtypes" and name in INT16_READABLE:
        assert entry["termination"] == "error:KeyError"  # what smdebug did; ours follows
        entry = {
            **entry,
            "evaluated_steps": [0, 1, 2],
            "fired_steps": INT16_READABLE[name],
            "termination": "NoMoreData",
            "last_step_tried": 3,
        }
    assert {f: ours[f] for f in FIELDS} == {f: entry[f] for f in FIELDS}


def test_int16_premise_of_the_dtypes_override(trials: dict[str, Any]) -> None:
    """The dtypes override rests on dt/int16 decoding (smdebug: KeyError) at steps 0, 1, 2."""
    trial = trial_for(trials, "dtypes")
    assert trial.steps() == [0, 1, 2]
    for step in trial.steps():
        value = trial.tensor("dt/int16").value(step)
        assert value.dtype == np.int16 and value.tolist() == [-2, 3, step]
    assert set(INT16_READABLE) == {
        name
        for name, e in load_golden("dtypes", "rules")["rules"].items()
        if e["termination"].startswith("error:")
    }


def test_no_golden_entry_skips_a_never_saved_step(trials: dict[str, Any]) -> None:
    """Visiting saved steps only changes nothing recorded: no entry skipped an unsaved integer."""
    for scenario in SCENARIOS:
        saved = set(trial_for(trials, scenario).steps(show_incomplete_steps=True))
        for entry in load_golden(scenario, "rules")["rules"].values():
            for steps in entry["skipped"].values():
                assert set(steps) <= saved, (scenario, entry["rule"])
