"""Rules in the manner of AWS's published ones, run by the ``rule-evaluator`` command as SageMaker
runs a custom rule: the model-pruning style (``base_trial._global_to_mode``, EVAL values by
mode step, ``self.logger``) and the gradient style (``req_tensors``, ``reduction_value``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.support.evaluator_cli import EvaluatorCli

FIRED = (
    "RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} "
    "resulted in the condition being met\n"
)

RULES = textwrap.dedent("""
    import numpy as np
    from smdebug import modes
    from smdebug.rules.rule import Rule


    class EvalAccuracyDrop(Rule):
        def __init__(self, base_trial, previous_accuracy="0.9"):
            super().__init__(base_trial)
            self.previous_accuracy = float(previous_accuracy)
            self.correct = 0
            self.samples = 0

        def invoke_at_step(self, step):
            mode, eval_step = self.base_trial._global_to_mode[step]
            if mode != modes.EVAL:
                return False
            out = self.base_trial.tensor("out").value(eval_step, mode=modes.EVAL)
            truth = self.base_trial.tensor("truth").value(eval_step, mode=modes.EVAL)
            self.correct += int(np.sum(np.argmax(out, axis=1) == truth))
            self.samples += truth.shape[0]
            accuracy = self.correct / self.samples
            self.logger.info(f"step {step}: accuracy {accuracy}")
            return accuracy < self.previous_accuracy


    class LargeGradient(Rule):
        def __init__(self, base_trial, threshold="10.0"):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def set_required_tensors(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                self.req_tensors.add(name, steps=[step])

        def invoke_at_step(self, step):
            for tensor in self.req_tensors.get():
                if tensor.reduction_value(step, "mean", abs=True) > self.threshold:
                    return True
            return False
""")


def write_job(root: Path) -> None:
    """TRAIN steps 0..5 with growing gradients, EVAL steps 6..8 whose last is all wrong."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("gradients", include_regex=["^grad/"])])
    for s in range(6):
        writer.write_step(
            s, {"grad/w": np.full(4, 3.0 * s, np.float32)}, mode=ModeKeys.TRAIN, mode_step=s
        )
    truth = np.array([0, 1, 1, 0])
    right = np.eye(2, dtype=np.float32)[truth]
    for e in range(3):
        out = right if e < 2 else right[:, ::-1]
        writer.write_step(6 + e, {"out": out, "truth": truth}, mode=ModeKeys.EVAL, mode_step=e)
    writer.end_training()


def run_rule(tmp_path: Path, name: str, **params: str) -> tuple[int, str | None, str]:
    trial, rule = tmp_path / "trial", tmp_path / "my_rules.py"
    write_job(trial)
    rule.write_text(RULES)
    cli = EvaluatorCli(tmp_path)
    env = {"base_trial": str(trial), "source_s3_uri": str(rule), "rule_to_invoke": name, **params}
    result = cli(env=env)
    message = cli.opt_ml / "output" / "message"
    text = message.read_text() if message.exists() else None
    return result.returncode, text, result.stdout + result.stderr


def test_the_pruning_style_rule_reaches_its_verdict(tmp_path: Path) -> None:
    """The rule reading ``_global_to_mode`` fires at the EVAL step where accuracy drops."""
    code, message, output = run_rule(tmp_path, "EvalAccuracyDrop")
    assert code == 1, output
    assert message == FIRED.format(rule="EvalAccuracyDrop", step=8)


def test_the_pruning_style_rule_finds_no_issue_with_a_low_bar(tmp_path: Path) -> None:
    """With a bar the accuracy never falls under, the same rule ends without issues."""
    code, message, output = run_rule(tmp_path, "EvalAccuracyDrop", previous_accuracy="0.5")
    assert code == 0, output
    assert message is None or "RuleEvaluationConditionMet" not in message


def test_the_gradient_style_rule_fires_where_the_mean_passes_the_threshold(
    tmp_path: Path,
) -> None:
    """``req_tensors`` plus ``reduction_value(abs=True)``: |mean| = 3 s passes 10 at step 4."""
    code, message, output = run_rule(tmp_path, "LargeGradient", threshold="10.0")
    assert code == 1, output
    assert message == FIRED.format(rule="LargeGradient", step=4)
