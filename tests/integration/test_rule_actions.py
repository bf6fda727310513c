"""Rule actions in a run: a met condition reaches the rule's ``action_json`` actions through
the run's sinks (``evaluator.sinks.actions``), once per firing, as smdebug 1.0.34 runs them
when ``invoke_at_step`` says the condition is met; the supervisor's last word runs none.

SNS is the moto server of the session (``AWS_ENDPOINT_URL``), which records what is published;
each test uses an endpoint of its own, and counts only the messages sent to it.
"""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from container import compose
from container.cli import evaluate
from container.compose import final_sinks
from evaluator.rules.actions import SNS_TOPIC
from evaluator.sinks import NullSink, RuleFired
from tests.support.evaluator_cli import ROOT, EvaluatorCli
from tests.support.s3server import REGION, MotoS3

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")

RULES = textwrap.dedent("""
    import time

    from smdebug.exceptions import RuleEvaluationConditionMet
    from smdebug.rules import Rule


    def read(rule, step):
        rule.base_trial.tensor(rule.base_trial.tensor_names()[0]).value(step)


    class EveryOtherStep(Rule):
        def __init__(self, base_trial, action_str):
            super().__init__(base_trial, action_str)
            self.seen = 0

        def invoke_at_step(self, step):
            read(self, step)
            self.seen += 1
            return self.seen % 2 == 1


    class RaisesItself(Rule):
        def __init__(self, base_trial, action_str=None):
            super().__init__(base_trial, action_str)

        def invoke_at_step(self, step):
            read(self, step)
            raise RuleEvaluationConditionMet(self.rule_name, step)


    class CallsItsActions(Rule):
        def __init__(self, base_trial, action_str=None):
            super().__init__(base_trial, action_str)
            self.called = False

        def invoke_at_step(self, step):
            read(self, step)
            if not self.called:
                self.called = True
                self._actions.invoke("asked by the rule")
            return False


    class FiresThenSleeps(Rule):
        def __init__(self, base_trial, action_str=None):
            super().__init__(base_trial, action_str)
            self.seen = 0

        def invoke_at_step(self, step):
            read(self, step)
            self.seen += 1
            if self.seen > 1:
                time.sleep(3600)
            return True
""")


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


@pytest.fixture
def endpoint(s3_server: MotoS3) -> str:
    """An e-mail address of this test's own (the server is shared by the session)."""
    return f"{uuid.uuid4().hex[:12]}@example.com"


def sent_to(endpoint: str) -> list[str]:
    """The messages published to SMDebugRules for ``endpoint``, in order."""
    backend = sns_backends[DEFAULT_ACCOUNT_ID][REGION]
    topic = backend.topics.get(f"arn:aws:sns:{REGION}:{DEFAULT_ACCOUNT_ID}:{SNS_TOPIC}")
    if topic is None:
        return []
    return [
        message
        for _, message, _, attributes, _ in topic.sent_notifications
        if attributes.get("email", {}).get("Value") == endpoint
    ]


def fired_message(rule: str, step: int) -> str:
    return (
        f"SMDebugRule:{rule} fired. Evaluation of the rule {rule} at step {step} resulted in "
        "the condition being met"
    )


def _evaluate(tmp_path: Path, rules_file: Path, rule: str, endpoint: str, *extra: str) -> Any:
    """Run the command in this process; the exit code and the result file."""
    output = tmp_path / "out"
    argv = [
        *("--trial-dir", EXAMPLE, "--rule", rule, "--source_s3_uri", str(rules_file)),
        *("--action_json", json.dumps({"name": "email", "endpoint": endpoint})),
        *("--output-dir", str(output), *extra),
    ]
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((output / "rule_evaluation_result.json").read_text(encoding="utf-8"))
    return code, result


def test_each_firing_runs_the_actions_once_through_the_sink(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """A rule that fires at every other step, with continue_after_fire: one message per fired
    step, with the condition's text, sent after the firing reached the sinks (a sink told
    before the actions sink sees none of that firing's messages yet)."""
    seen: list[int] = []

    class Probe(NullSink):
        def rule_fired(self, event: RuleFired) -> None:
            seen.append(len(sent_to(endpoint)))

    monkeypatch.setattr(compose, "SINKS", [lambda context: Probe(), *compose.SINKS])
    code, result = _evaluate(
        tmp_path, rules_file, "EveryOtherStep", endpoint, "--continue_after_fire", "true"
    )
    fired = result["rules"][0]["fired_steps"]
    assert code == 1 and len(fired) >= 2
    assert sent_to(endpoint) == [fired_message("EveryOtherStep", step) for step in fired]
    assert all(sent <= i for i, sent in enumerate(seen))  # no action before its firing


def test_the_first_firing_ends_the_run_after_its_actions(
    tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """Without continue_after_fire the run ends at its first firing: one message."""
    code, result = _evaluate(tmp_path, rules_file, "EveryOtherStep", endpoint)
    [step] = result["rules"][0]["fired_steps"]
    assert code == 1 and sent_to(endpoint) == [fired_message("EveryOtherStep", step)]


def test_without_an_actions_sink_the_rule_runs_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """A run composed without the actions sink leaves the actions to the rule, as in smdebug:
    the firing's message is still sent, once."""
    kept = [factory for factory in compose.SINKS if factory is not compose.actions_sink]
    monkeypatch.setattr(compose, "SINKS", kept)
    code, result = _evaluate(tmp_path, rules_file, "EveryOtherStep", endpoint)
    [step] = result["rules"][0]["fired_steps"]
    assert code == 1 and sent_to(endpoint) == [fired_message("EveryOtherStep", step)]


def test_a_condition_the_rule_raises_itself_runs_no_action(
    tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """As in smdebug, only a true invoke_at_step runs the actions: a rule that raises
    RuleEvaluationConditionMet itself fires without them."""
    code, result = _evaluate(tmp_path, rules_file, "RaisesItself", endpoint)
    assert code == 1 and result["rules"][0]["fired_steps"]
    assert sent_to(endpoint) == []


def test_a_rule_that_calls_its_own_actions_still_does(
    tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """A user's rule that invokes ``self._actions`` itself sends its message, once."""
    code, _ = _evaluate(tmp_path, rules_file, "CallsItsActions", endpoint)
    assert code == 0
    assert sent_to(endpoint) == ["SMDebugRule:CallsItsActions fired. asked by the rule"]


def test_the_supervisors_last_word_runs_no_action(
    tmp_path: Path, rules_file: Path, endpoint: str
) -> None:
    """A rule fires at its first step, then its next step overruns rule_step_timeout and the
    supervisor ends the run: the firing's message was sent by the evaluation, and the
    supervisor's last word, which the actions sink hears too, sends nothing more."""
    cli = EvaluatorCli(tmp_path)
    run = cli(
        *("--trial-dir", EXAMPLE, "--rule", "FiresThenSleeps", "--source_s3_uri", str(rules_file)),
        *("--action_json", json.dumps({"name": "email", "endpoint": endpoint})),
        *("--continue_after_fire", "true", "--rule_step_timeout", "2"),
        aws=True,
        timeout=90,
    )
    assert run.returncode == 2, run.describe()
    assert run.result is not None and run.result["rules"][0]["error_type"] == "RuleStepTimeout"
    [step] = run.result["rules"][0]["fired_steps"]
    assert sent_to(endpoint) == [fired_message("FiresThenSleeps", step)]
    context = {"result_dir": str(tmp_path / "none"), "report": "none"}
    assert final_sinks(context, None, None).runs_actions  # heard, and deliberately silent
