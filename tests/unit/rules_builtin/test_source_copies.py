"""The public rule kit (issue 27, item 6): what ``rule-evaluator rules NAME --source`` prints for
every built-in rule runs, unedited, as a user's rule file through the loader (as
``--source_s3_uri my_rule.py`` would) and judges a real-hook trial exactly as the built-in does:
the same fired steps, steps evaluated and skipped, end, and checks counted."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from evaluator.rules import invoke_rule
from evaluator.rules.coverage import checked_nothing
from evaluator.rules.loader import build_rule, load_rule_class
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin._describe import module_source
from tests.hook_trials.outcomes import FAULTS, ROOT
from tests.support.s3server import MotoS3

RULES = registry.names()
HEALTHY = ("keras_healthy", "pytorch_healthy", "xgboost_healthy")
# Faulty trials every rule is compared on besides its own fault's: where many rules fire.
ALSO = ("keras_exploding", "xgboost_imbalanced")
# Parameters a rule cannot run without (it names the tensors to check, or its thresholds).
PARAMETERS = {
    "AllZero": {"collection_names": "weights,gradients"},
    "TensorVariance": {"collection_names": "weights", "max_threshold": "0.01"},
}
# Rules that fire on none of these trials (they need data the hooks' trials do not hold):
# compared on quiet or "checked nothing" runs only.
QUIET_EVERYWHERE = {
    "CheckInputImages",
    "CreateXgboostReport",
    "LearningRateSchedule",  # no hook trial logs a learning rate
    "ThroughputDrop",  # nor a throughput
    "NLPSequenceRatio",
    "StalledTrainingRule",
}


def _trials(rule: str) -> list[str]:
    """The real-hook trials made with the rule's fault (where it must fire), two faulty ones
    where many rules fire, and the healthy one of each framework."""
    own = [t for t, rules in FAULTS.items() if rule in rules]
    return own + [t for t in (*ALSO, *HEALTHY) if t not in own]


def _verdict(cls: type, trial_name: str, out: Path) -> dict[str, Any]:
    """What ``cls`` (built-in or copy) decides on the trial, with default parameters."""
    trial = create_trial(str(ROOT / trial_name))
    others = [create_trial(str(ROOT / "pytorch_exploding"))] if "other_trials" in _args(cls) else []
    try:
        params = dict(PARAMETERS.get(cls.__name__, {}))
        if "output_dir" in _args(cls):
            params["output_dir"] = str(out)
        rule = build_rule(cls, trial, params, other_trials=others)
        result = invoke_rule(rule, raise_eval_cond=False)
        return {
            "fired": list(result.fired_steps),
            "evaluated": result.steps_evaluated,
            "skipped": result.steps_skipped,
            "ended_by": str(result.ended_by),
            "checked_nothing": checked_nothing(rule, result),
            "records_comparisons": getattr(rule, "RECORDS_COMPARISONS", False),
        }
    finally:
        for opened in [trial, *others]:
            opened.close()


def _args(cls: type) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters)


@pytest.mark.parametrize("name", RULES)
def test_a_copied_builtin_judges_as_the_builtin(name: str, tmp_path: Path) -> None:
    """The --source copy of the rule, loaded from a file as a user's rule, gives the built-in's
    verdict on its fault's trials and on the healthy ones, and registers no built-in."""
    builtin = registry.lookup(name)
    assert builtin is not None
    source = module_source(name)
    assert not re.search(r"^from rules_builtin\.(_\w+|registry) import", source, re.M), source
    path = tmp_path / "my_rule.py"
    path.write_text(source, encoding="utf-8")
    copy = load_rule_class(name, str(path), workdir=tmp_path / "work")
    assert copy is not builtin and copy.__module__.startswith("user_rule_my_rule")
    assert registry.lookup(name) is builtin
    fired = []
    for trial in _trials(name):
        expected = _verdict(builtin, trial, tmp_path / "builtin" / trial)
        assert _verdict(copy, trial, tmp_path / "copy" / trial) == expected, trial
        fired += [trial] if expected["fired"] else []
    assert bool(fired) is (name not in QUIET_EVERYWHERE), fired


def test_the_helpers_of_the_builtins_are_public() -> None:
    """rules_builtin.kit gives every name the built-ins' private helper modules export."""
    import importlib

    from rules_builtin import kit

    for helper in kit.HELPER_MODULES:
        module = importlib.import_module(f"rules_builtin.{helper}")
        for exported in module.__all__:
            assert getattr(kit, exported) is getattr(module, exported)
            assert exported in dir(kit)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        kit.nothing_here  # noqa: B018


def test_a_copy_uploaded_to_s3_runs_as_the_builtin(
    tmp_path: Path, s3_server: MotoS3, s3_bucket: str
) -> None:
    """A copy uploaded to S3 and named by ``source_s3_uri``, as a SageMaker job names it, is
    downloaded, loaded and judges the built-in's fault trial as the built-in does."""
    s3_server.client().put_object(
        Bucket=s3_bucket, Key="rules/my_rule.py", Body=module_source("DeadRelu").encode()
    )
    copy = load_rule_class(
        "DeadRelu", f"s3://{s3_bucket}/rules/my_rule.py", workdir=tmp_path / "work"
    )
    builtin = registry.lookup("DeadRelu")
    assert builtin is not None and copy is not builtin
    expected = _verdict(builtin, "keras_dead_relu", tmp_path / "builtin")
    assert expected["fired"]
    assert _verdict(copy, "keras_dead_relu", tmp_path / "copy") == expected
