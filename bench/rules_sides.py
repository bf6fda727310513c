"""The two sides of the ``rules`` workload (``rules_workload.py``): what differs between our rule
framework and smdebug 1.0.34's (the Rule base, the trial, building and invoking a rule), behind
one small ``Side`` class. Stdlib only at import time: each side imports its framework when
made."""

from __future__ import annotations

import os
import sys

import smdebug_standins
from process_info import REPO_ROOT, project_version


class Side:
    """What differs between the two sides: the Rule base, the trial, building and invoking."""

    impl: str
    rule_base: type
    info: dict

    def create_trial(self, path: str):
        raise NotImplementedError

    def build(self, cls: type, trial, params: dict, other_trials: list):
        raise NotImplementedError

    def run(self, rule, end_step: int | None = None) -> dict:
        """Run over all steps (before ``end_step``); returns evaluated, skipped, fired, ended_by."""
        raise NotImplementedError


class Ours(Side):
    impl = "ours"

    def __init__(self) -> None:
        if REPO_ROOT not in sys.path:
            sys.path.insert(0, REPO_ROOT)
        import evaluator
        from evaluator.rules.invoker import invoke_rule
        from evaluator.rules.loader import build_rule
        from evaluator.rules.rule import Rule
        from evaluator.trial import create_trial

        self._create_trial = create_trial
        self._build_rule = build_rule
        self._invoke_rule = invoke_rule
        self.rule_base = Rule
        self.info = {
            "impl_version": getattr(evaluator, "__version__", None) or project_version(),
            "impl_file": os.path.dirname(evaluator.__file__),
        }

    def create_trial(self, path: str):
        return self._create_trial(path)

    def build(self, cls, trial, params, other_trials):
        return self._build_rule(cls, trial, params, other_trials=other_trials)

    def run(self, rule, end_step: int | None = None) -> dict:
        r = self._invoke_rule(
            rule, end_step=end_step, raise_eval_cond=False, continue_after_fire=True
        )
        return {
            "evaluated": r.steps_evaluated,
            "skipped": r.steps_skipped,
            "fired": list(r.fired_steps),
            "ended_by": str(r.ended_by),
        }


class Smdebug(Side):
    impl = "smdebug"

    def __init__(self) -> None:
        import smdebug
        import smdebug.exceptions as sx
        from smdebug.core.modes import ModeKeys
        from smdebug.rules import Rule, invoke_rule
        from smdebug.rules.action import Actions
        from smdebug.trials import create_trial

        self._sx = sx
        self._create_trial = create_trial
        self._invoke_rule = invoke_rule
        self.rule_base = Rule
        self.info = {
            "impl_version": getattr(smdebug, "__version__", "?"),
            "impl_file": os.path.dirname(smdebug.__file__),
        }
        if self.info["impl_version"] != "1.0.34":
            print(
                f"warning: smdebug {self.info['impl_version']} imported, the anchor is 1.0.34",
                file=sys.stderr,
            )
        smdebug_standins.install(sx, ModeKeys, Rule, Actions)

    def create_trial(self, path: str):
        return self._create_trial(path)

    def build(self, cls, trial, params, other_trials):
        kwargs = dict(params)
        if other_trials:
            kwargs["other_trials"] = list(other_trials)
        return cls(trial, **kwargs)

    def run(self, rule, end_step: int | None = None) -> dict:
        sx = self._sx
        tally = {"evaluated": 0, "skipped": 0, "fired": [], "ended_by": None}
        skipping = (sx.TensorUnavailableForStep, sx.StepUnavailable, sx.TensorUnavailable)
        invoke = rule.invoke

        def counting_invoke(step):  # smdebug's invoke_rule calls rule_obj.invoke(step)
            try:
                invoke(step)
            except sx.RuleEvaluationConditionMet as e:
                tally["evaluated"] += 1
                tally["fired"].append(int(e.step))
                raise
            except skipping:
                tally["skipped"] += 1
                raise
            tally["evaluated"] += 1

        rule.invoke = counting_invoke
        try:
            self._invoke_rule(rule, start_step=0, end_step=end_step, raise_eval_cond=False)
            tally["ended_by"] = "returned"
        except sx.NoMoreData:
            tally["ended_by"] = "NoMoreData"  # the normal end of a finished trial
        finally:
            del rule.invoke
        # smdebug's framework has no end-of-data judgement. A rule that has one (ours:
        # ``invoke_at_end``, e.g. Confusion judging the trained model) gets it here, once, as
        # our invoke_rule gives it when the data ends: the same rule code, and its firing
        # counted at the step it names.
        at_end = getattr(rule, "invoke_at_end", None)
        if callable(at_end) and tally["ended_by"] in ("NoMoreData", "returned"):
            step = at_end()
            if step is not None:
                tally["fired"].append(int(step))
            tally["ended_by"] += " + invoke_at_end"
        return tally
