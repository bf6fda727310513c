"""A rule script written for smdebug runs unchanged on ours through the ``smdebug.rules`` names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.compat.golden import DATA

SCRIPT = textwrap.dedent(f"""
    import numpy as np
    from smdebug.trials import create_trial
    from smdebug.rules import Rule, invoke_rule
    from smdebug.rules.rule import Rule as RuleAgain
    from smdebug.rules.rule_invoker import invoke_rule as invoke_again
    from smdebug.rules.req_tensors import RequiredTensors
    from smdebug.rules.action import Actions
    from smdebug.exceptions import RuleEvaluationConditionMet, NoMoreData
    import smdebug

    class ExplodingLoss(Rule):
        def __init__(self, base_trial, action_str):
            super().__init__(base_trial, action_str)

        def set_required_tensors(self, step):
            self.req_tensors.add("loss", [step])

        def invoke_at_step(self, step):
            return bool(np.isnan(self.base_trial.tensor("loss").value(step)).any())

    assert RuleAgain is Rule and invoke_again is invoke_rule
    trial = create_trial({str(DATA / "exploding")!r})
    assert isinstance(ExplodingLoss(trial, None).req_tensors, RequiredTensors)
    rule = ExplodingLoss(trial, "")
    try:
        invoke_rule(rule, raise_eval_cond=True)
    except RuleEvaluationConditionMet as e:
        print(smdebug.__evaluator_shim__, e.step, Actions(None, "x").actions)
""")


def test_smdebug_rule_script_runs_unchanged(tmp_path: Path) -> None:
    """Rule, invoke_rule, RequiredTensors and Actions import under smdebug's names and work."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "7", "[]"]
