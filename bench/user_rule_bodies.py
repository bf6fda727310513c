"""Five rules as a user writes them for smdebug 1.0.34: ``smdebug.rules.Rule`` subclasses that
use only smdebug's names (the bodies of tests/compat/rule_bodies.py, whose semantics the golden
runs of the real smdebug fixed). ``bench/user_rules.py`` runs them through
``smdebug.rules.invoke_rule`` under either interpreter: the real smdebug 1.0.34 in its venv,
or ours through the ``smdebug`` import names our package installs (docs/compatibility.md).

Each rule records the steps that reached its body and the steps it fired at, so that the two
sides can be compared; nothing else differs from what a user writes.
"""

from __future__ import annotations

import numpy as np
from smdebug.core.modes import ModeKeys
from smdebug.exceptions import TensorUnavailableForStep
from smdebug.rules import Rule


class UserRule(Rule):
    def __init__(self, base_trial) -> None:
        super().__init__(base_trial, action_str=None)
        self.evaluated = 0
        self.fired: list[int] = []

    def invoke_at_step(self, step):
        self.evaluated += 1
        met = self.check(step)
        if met:
            self.fired.append(step)
        return met

    def check(self, step):
        raise NotImplementedError

    def selected(self, collections, regex=None):
        names = set()
        for collection in collections or ():
            names.update(self.base_trial.tensor_names(collection=collection))
        if regex:
            names.update(self.base_trial.tensor_names(regex=regex))
        return sorted(names)

    def present(self, names, step):
        at_step = set(self.base_trial.tensor_names(step=step))
        return [n for n in names if n in at_step]

    def value_or_none(self, name, step):
        try:
            return np.asarray(self.base_trial.tensor(name).value(step))
        except TensorUnavailableForStep:
            return None


class VanishingGradient(UserRule):
    """Fires if a gradient has mean |g| below the threshold (the plan's 0.72 fires on the
    bench trial's standard-normal gradients now and then)."""

    def __init__(self, base_trial, threshold=0.72) -> None:
        super().__init__(base_trial)
        self.threshold = threshold

    def check(self, step):
        names = self.present(self.base_trial.tensor_names(collection="gradients"), step)
        means = [self.base_trial.tensor(n).reduction_value(step, "mean", abs=True) for n in names]
        return any(m < self.threshold for m in means)


class ExplodingTensor(UserRule):
    """Fires if any tensor holds a NaN or an infinity."""

    def check(self, step):
        fired = False
        for name in self.present(self.base_trial.tensor_names(), step):
            value = self.value_or_none(name, step)
            if value is None or value.dtype.kind not in "fc":
                continue
            fired = fired or bool((~np.isfinite(value)).any())
        return fired


class AllZero(UserRule):
    """Fires if a gradient or weight is all zeros."""

    def check(self, step):
        fired = False
        for name in self.present(self.selected(["gradients", "weights"]), step):
            value = self.value_or_none(name, step)
            if value is not None and value.size > 0 and not value.any():
                fired = True
        return fired


class WeightUpdateRatio(UserRule):
    """Requires every weight at s-1 and s; fires if ||w(s)-w(s-1)|| / ||w(s-1)|| is above the
    threshold (the plan's 1.55)."""

    def __init__(self, base_trial, large_threshold=1.55, small_threshold=1e-8) -> None:
        super().__init__(base_trial)
        self.large_threshold = large_threshold
        self.small_threshold = small_threshold

    def set_required_tensors(self, step):
        if step >= 1:
            for name in self.base_trial.tensor_names(collection="weights"):
                self.req_tensors.add(name, steps=[step - 1, step])

    def check(self, step):
        if step < 1:
            return False
        weights = self.base_trial.tensor_names(collection="weights")
        both = [n for n in self.present(weights, step) if n in self.present(weights, step - 1)]
        fired = False
        for name in both:
            tensor = self.base_trial.tensor(name)
            before, now = np.asarray(tensor.value(step - 1)), np.asarray(tensor.value(step))
            ratio = np.linalg.norm((now - before).ravel()) / (np.linalg.norm(before.ravel()) + 1e-9)
            fired = fired or bool(ratio > self.large_threshold or ratio < self.small_threshold)
        return fired


class LossNotDecreasing(UserRule):
    """Per loss of the ``losses`` collection, every ``num_steps`` mode steps: fires unless it
    fell (the bench trial saves no loss: the body looks and finds none, as a user's would)."""

    def __init__(self, base_trial, num_steps=10) -> None:
        super().__init__(base_trial)
        self.num_steps = num_steps
        self.mode = None
        self.last: dict = {}

    def check(self, step):
        if self.mode is None:
            found = [m for m in (ModeKeys.EVAL, ModeKeys.TRAIN) if self.base_trial.steps(mode=m)]
            self.mode = found[0] if found else ModeKeys.GLOBAL
        step_mode, mode_step = self.base_trial.mode_modestep(step)
        if self.mode != ModeKeys.GLOBAL and step_mode != self.mode:
            return False
        ms = step if self.mode == ModeKeys.GLOBAL else mode_step
        fired = False
        for name in self.selected(["losses"]):
            tensor = self.base_trial.tensor(name)
            saved = tensor.steps(mode=self.mode)
            last = self.last.get(name)
            if ms not in saved or (last is not None and ms < last + self.num_steps):
                continue
            earlier = [s for s in saved if s <= ms - self.num_steps]
            if not earlier:
                continue
            current = float(tensor.value(ms, mode=self.mode))
            previous = float(tensor.value(earlier[-1], mode=self.mode))
            self.last[name] = ms
            fired = fired or not current < previous
        return fired


RULES = (VanishingGradient, ExplodingTensor, AllZero, WeightUpdateRatio, LossNotDecreasing)
