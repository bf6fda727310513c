"""Rule bodies of the golden rules files, written from each entry's ``semantics`` string.

These are test doubles that exercise the rule framework (``Rule``, ``RequiredTensors``,
``invoke_rule``) exactly as the reference run did; they are not the product's built-in rules.
Each class records the steps that reached ``invoke_at_step`` (the golden ``evaluated_steps``).
Parameters are Python values, as in the golden ``params``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules import Rule

__all__ = ["RULES", "make_rule"]


class RecordingRule(Rule):
    """A rule whose body is ``check(step)``; remembers every step that reached the body."""

    def __init__(self, base_trial: Any) -> None:
        super().__init__(base_trial)
        self.reached: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.reached.append(step)
        return self.check(step)

    def check(self, step: int) -> bool:
        raise NotImplementedError

    def selected(
        self, collection_names: list[str] | None, tensor_regex: list[str] | None
    ) -> list[str]:
        """The union of the collections' tensors and the regex matches, sorted."""
        names: set[str] = set()
        for collection in collection_names or ():
            names.update(self.base_trial.tensor_names(collection=collection))
        if tensor_regex:
            names.update(self.base_trial.tensor_names(regex=tensor_regex))
        return sorted(names)

    def present(self, names: list[str], step: int) -> list[str]:
        """Those of ``names`` saved at global ``step``, in order."""
        at_step = set(self.base_trial.tensor_names(step=step))
        return [n for n in names if n in at_step]

    def value_or_none(self, name: str, step: int) -> np.ndarray | None:
        """The value at ``step``, None when only reductions or a shape were saved."""
        try:
            return np.asarray(self.base_trial.tensor(name).value(step))
        except TensorUnavailableForStep:
            return None


class AllZero(RecordingRule):
    """Fires if a selected tensor present at s has size > 0 and every element == 0."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: list[str] | None = None,
        tensor_regex: list[str] | None = None,
    ) -> None:
        super().__init__(base_trial)
        if not collection_names and not tensor_regex:
            raise ValueError("AllZero needs collection_names or tensor_regex")
        self.collection_names = collection_names
        self.tensor_regex = tensor_regex

    def check(self, step: int) -> bool:
        fired = False
        for name in self.present(self.selected(self.collection_names, self.tensor_regex), step):
            value = self.value_or_none(name, step)
            if value is not None and value.size > 0 and not value.any():
                fired = True
        return fired


class ExplodingTensor(RecordingRule):
    """Fires if a selected tensor (all when none selected) present at s holds NaN, or +-inf
    unless ``only_nan``; tensors without a value at s are skipped."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: list[str] | None = None,
        tensor_regex: list[str] | None = None,
        only_nan: bool = False,
    ) -> None:
        super().__init__(base_trial)
        self.collection_names = collection_names
        self.tensor_regex = tensor_regex
        self.only_nan = only_nan

    def check(self, step: int) -> bool:
        if self.collection_names or self.tensor_regex:
            names = self.selected(self.collection_names, self.tensor_regex)
        else:
            names = self.base_trial.tensor_names()
        fired = False
        for name in self.present(names, step):
            value = self.value_or_none(name, step)
            if value is None or value.dtype.kind not in "fc":
                continue
            bad = np.isnan(value) if self.only_nan else ~np.isfinite(value)
            fired = fired or bool(bad.any())
        return fired


class LossNotDecreasing(RecordingRule):
    """Per size-1 loss tensor, every ``num_steps`` mode steps: fires unless the value fell below
    the newest saved value ``num_steps`` or more mode steps earlier (by ``diff_percent``)."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: list[str] | None = None,
        tensor_regex: list[str] | None = None,
        use_losses_collection: bool = True,
        num_steps: int = 10,
        diff_percent: float = 0.0,
        mode: str | None = None,
    ) -> None:
        super().__init__(base_trial)
        self.collections = list(collection_names or []) + (
            ["losses"] if use_losses_collection else []
        )
        self.tensor_regex = tensor_regex
        self.num_steps = num_steps
        self.diff_percent = diff_percent
        self.mode = ModeKeys[mode] if mode else None
        self.last_evaluated: dict[str, int] = {}

    def _chosen_mode(self) -> ModeKeys:
        if self.mode is None:
            found = [m for m in (ModeKeys.EVAL, ModeKeys.TRAIN) if self.base_trial.steps(mode=m)]
            self.mode = found[0] if found else ModeKeys.GLOBAL
        return self.mode

    def check(self, step: int) -> bool:
        mode = self._chosen_mode()
        if mode == ModeKeys.GLOBAL:
            mode_step: int | None = step
        else:
            step_mode, mode_step = self.base_trial.mode_modestep(step)
            if step_mode != mode:
                return False
        assert mode_step is not None
        fired = False
        for name in self.selected(self.collections, self.tensor_regex):
            fired = self._check_tensor(name, mode, mode_step) or fired
        return fired

    def _check_tensor(self, name: str, mode: ModeKeys, ms: int) -> bool:
        tensor = self.base_trial.tensor(name)
        saved = tensor.steps(mode=mode)
        if ms not in saved:
            return False
        last = self.last_evaluated.get(name)
        if last is not None and ms < last + self.num_steps:
            return False
        current = np.asarray(tensor.value(ms, mode=mode))
        earlier = [s for s in saved if s <= ms - self.num_steps]
        if current.size != 1 or not earlier:
            return False
        previous = np.asarray(tensor.value(earlier[-1], mode=mode))
        self.last_evaluated[name] = ms
        # "not decreasing" is "not (cur < bound)": a NaN loss counts as not decreasing.
        return not bool(current.item() < previous.item() * (1 - self.diff_percent / 100))


class UnchangedTensor(RecordingRule):
    """Fires if a selected tensor present at s equals (np.allclose) its values at the other
    steps of ``prev_steps(s, n=num_steps)``, when there are ``num_steps`` of them."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: list[str] | None = None,
        tensor_regex: list[str] | None = None,
        num_steps: int = 3,
        rtol: float = 1e-5,
        atol: float = 1e-8,
        equal_nan: bool = False,
    ) -> None:
        super().__init__(base_trial)
        self.collection_names = collection_names
        self.tensor_regex = tensor_regex
        self.num_steps = num_steps
        self.tolerances = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}

    def check(self, step: int) -> bool:
        fired = False
        for name in self.present(self.selected(self.collection_names, self.tensor_regex), step):
            current = self.value_or_none(name, step)
            if current is None:
                continue
            tensor = self.base_trial.tensor(name)
            steps = tensor.prev_steps(step, n=self.num_steps)
            if len(steps) == self.num_steps and all(
                np.allclose(current, tensor.value(p), **self.tolerances) for p in steps if p != step
            ):
                fired = True
        return fired


class VanishingGradient(RecordingRule):
    """Fires if a gradient present at s has mean |g| (saved reduction or computed) < threshold."""

    def __init__(self, base_trial: Any, threshold: float = 1e-7) -> None:
        super().__init__(base_trial)
        self.threshold = threshold

    def check(self, step: int) -> bool:
        names = self.present(self.base_trial.tensor_names(collection="gradients"), step)
        means = [self.base_trial.tensor(n).reduction_value(step, "mean", abs=True) for n in names]
        return any(m < self.threshold for m in means)


class WeightUpdateRatio(RecordingRule):
    """Requires every weight at s-1 and s; fires if ||w(s)-w(s-1)|| / (||w(s-1)|| + epsilon)
    is above ``large_threshold`` or below ``small_threshold`` for a weight present at both."""

    def __init__(
        self,
        base_trial: Any,
        large_threshold: float = 10.0,
        small_threshold: float = 1e-8,
        epsilon: float = 1e-9,
    ) -> None:
        super().__init__(base_trial)
        self.large_threshold = large_threshold
        self.small_threshold = small_threshold
        self.epsilon = epsilon

    def set_required_tensors(self, step: int) -> None:
        if step >= 1:
            for name in self.base_trial.tensor_names(collection="weights"):
                self.req_tensors.add(name, steps=[step - 1, step])

    def check(self, step: int) -> bool:
        if step < 1:
            return False
        weights = self.base_trial.tensor_names(collection="weights")
        both = [n for n in self.present(weights, step) if n in self.present(weights, step - 1)]
        fired = False
        for name in both:
            tensor = self.base_trial.tensor(name)
            before, now = np.asarray(tensor.value(step - 1)), np.asarray(tensor.value(step))
            ratio = np.linalg.norm((now - before).ravel()) / (
                np.linalg.norm(before.ravel()) + self.epsilon
            )
            fired = fired or bool(ratio > self.large_threshold or ratio < self.small_threshold)
        return fired


RULES: dict[str, type[RecordingRule]] = {
    cls.__name__: cls
    for cls in (
        AllZero,
        ExplodingTensor,
        LossNotDecreasing,
        UnchangedTensor,
        VanishingGradient,
        WeightUpdateRatio,
    )
}


def make_rule(entry: dict[str, Any], trial: Any) -> RecordingRule:
    """The rule of a golden entry (``rule`` and ``params``) on ``trial``."""
    return RULES[entry["rule"]](trial, **entry["params"])
