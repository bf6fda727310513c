"""LossNotDecreasing: a scalar loss that has not gone down enough over ``num_steps`` steps."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any


from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from rules_builtin._params import Param, parse_bool, parse_float, parse_int, parse_list, parse_mode
from rules_builtin._select import TensorSelection, scalar
from rules_builtin.registry import register

__all__ = ["LossNotDecreasing"]

GLOBAL = ModeKeys.GLOBAL
_PREFERRED = (ModeKeys.EVAL, ModeKeys.TRAIN)  # the order tried when ``mode`` is unset


@dataclass
class _View:
    """One loss tensor's saved steps in one numbering: a mode's steps, or (GLOBAL) every
    saved global step. Only the steps a comparison can still need are kept."""

    recent: deque[int] = field(default_factory=deque)
    last_evaluated: int | None = None

    def add(self, step: int, num_steps: int) -> None:
        if self.recent and step <= self.recent[-1]:
            return
        self.recent.append(step)
        while len(self.recent) >= 2 and self.recent[1] <= step - num_steps:
            self.recent.popleft()

    def comparison_step(self, num_steps: int) -> int | None:
        """The newest saved step at least ``num_steps`` before the newest one."""
        if not self.recent or self.recent[0] > self.recent[-1] - num_steps:
            return None
        return self.recent[0]


@dataclass
class _Loss:
    views: dict[ModeKeys, _View]
    best: float | None = None  # the lowest value read so far


@register
class LossNotDecreasing(Rule):
    """Fires at a step where a loss, compared with its value ``num_steps`` or more steps
    earlier, did not go down by at least ``diff_percent`` %, or where it is more than
    ``increase_threshold_percent`` % above the lowest value the rule has read for it.

    Tensors: the union of the ``losses`` collection (when ``use_losses_collection``),
    ``collection_names`` and ``tensor_regex``; only scalar (one-element) tensors are checked.
    With ``use_losses_collection=False`` one of the other two is required.

    When: per tensor, a step is evaluated only if a saved value at least ``num_steps`` steps
    earlier exists (the newest such one is the comparison value) and the step is at least
    ``num_steps`` after the last evaluated one. Saving every 3 steps with ``num_steps=10``,
    step 21 is compared with step 9 and the next evaluation is at step 33. Steps count in the
    chosen mode's own numbering (mode steps); ``mode=GLOBAL`` uses global steps over every
    mode. With ``mode`` unset, each tensor uses the first of EVAL, TRAIN whose saved steps
    already allow a comparison; a tensor never saved in EVAL or TRAIN mode uses GLOBAL.
    So a job's TRAIN loss is checked until its EVAL loss has ``num_steps`` mode steps of
    history, and the EVAL loss from then on.

    Formula (the sources disagree; this is our choice): with ``prev`` the comparison value,
    ``cur`` the current one and ``best`` the lowest value read before ``cur`` (at evaluations
    and their comparison steps), it fires if

    * ``cur >= prev - |prev| * diff_percent / 100`` (did not decrease by ``diff_percent`` %;
      an equal loss counts as not decreasing; a NaN loss always fires), or
    * ``cur > best + |best| * increase_threshold_percent / 100`` (has risen more than
      ``increase_threshold_percent`` % above its best, even if it went down since the last
      comparison).

    This follows the current AWS documentation, where ``diff_percent`` is the minimum
    decrease. It reproduces the first 2019 test vector (losses 0.30, 0.33, 0.31, 0.30, 0.28
    at steps 0, 4, 8, 12, 16: first fire at 12, equal to step 0; invoked from step 13, no
    fire, as 16 went down from 4). It does not reproduce the second: with ``diff_percent=20``
    it fires at 12 (no 20 % decrease since step 0) and again at 24, where the 2019 rule first
    fired at 24, because that implementation treated ``diff_percent`` as a tolerated
    *increase*. The 2019 default ``diff_percent`` was 0; the documented default 0.1 is used.
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections whose scalar tensors are checked."),
        Param("tensor_regex", None, "list", "Regular expressions of scalar tensors to check."),
        Param("use_losses_collection", "True", "bool",
              "Also check the tensors of the losses collection."),
        Param("num_steps", "10", "int",
              "Compare with the loss at least this many steps earlier; evaluate every this "
              "many steps."),
        Param("diff_percent", "0.1", "float",
              "Fire unless the loss went down by at least this percentage."),
        Param("increase_threshold_percent", "5", "float",
              "Fire when the loss is more than this percentage above its lowest value."),
        Param("mode", None, "mode",
              "TRAIN, EVAL or GLOBAL; unset tries EVAL, then TRAIN, then GLOBAL."),
    )

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, use_losses_collection: str | bool = "True",
                 num_steps: str | int = "10", diff_percent: str | float = "0.1",
                 increase_threshold_percent: str | float = "5", mode: str | None = None,
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        use_losses = parse_bool(name, "use_losses_collection", use_losses_collection)
        collections = parse_list(collection_names) + (["losses"] if use_losses else [])
        self.selection = TensorSelection(name, collections, tensor_regex)
        if not self.selection.given:
            raise ConfigurationError(
                f"{name} needs tensors to check: set collection_names or tensor_regex, or "
                "leave use_losses_collection true")
        self.num_steps = parse_int(name, "num_steps", num_steps, minimum=1)
        self.diff_percent = parse_float(name, "diff_percent", diff_percent)
        self.increase_threshold_percent = parse_float(
            name, "increase_threshold_percent", increase_threshold_percent)
        self.mode = parse_mode(name, "mode", mode)
        self._losses: dict[str, _Loss] = {}
        self._skipped: set[str] = set()  # not scalar

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode is None or mode_step is None:
            return False
        if self.mode is not None and self.mode != GLOBAL and mode != self.mode:
            return False
        fired = False
        for name in self.selection.names(self.base_trial, step=step):
            if name not in self._skipped:
                fired = self._check(name, step, mode, mode_step) or fired
        return fired

    # ---------------------------------------------------------------- one tensor

    def _check(self, name: str, step: int, mode: ModeKeys, mode_step: int) -> bool:
        loss = self._losses.get(name)
        if loss is None:
            loss = self._losses[name] = self._start(name, step, mode, mode_step)
        if mode != GLOBAL and mode in loss.views:
            loss.views[mode].add(mode_step, self.num_steps)
        if GLOBAL in loss.views:
            loss.views[GLOBAL].add(step, self.num_steps)
        view_mode = self._active_mode(loss)
        if view_mode is None or (view_mode != GLOBAL and view_mode != mode):
            return False
        return self._evaluate(name, loss, view_mode, step if view_mode == GLOBAL else mode_step)

    def _start(self, name: str, step: int, mode: ModeKeys, mode_step: int) -> _Loss:
        """Seed the views from the steps saved so far (once per tensor), so that a run
        started after step 0 still finds the earlier comparison steps."""
        trial = self.base_trial
        tensor = trial.tensor(name)
        wanted = [self.mode] if self.mode is not None else [*_PREFERRED, GLOBAL]
        views: dict[ModeKeys, _View] = {}
        for m in wanted:
            view = views[m] = _View()
            for s in tensor.steps(mode=m):
                if m == GLOBAL or m == mode:
                    seen = s <= (step if m == GLOBAL else mode_step)
                else:  # another mode: only its steps saved before this global step
                    g = trial.global_step(m, s)
                    seen = g is not None and g < step
                if seen:
                    view.add(s, self.num_steps)
        return _Loss(views)

    def _active_mode(self, loss: _Loss) -> ModeKeys | None:
        if self.mode is not None:
            return self.mode
        for m in _PREFERRED:
            if loss.views[m].comparison_step(self.num_steps) is not None:
                return m
        if any(loss.views[m].recent for m in _PREFERRED):
            return None  # wait until EVAL or TRAIN has enough history
        return GLOBAL

    def _evaluate(self, name: str, loss: _Loss, mode: ModeKeys, at: int) -> bool:
        view = loss.views[mode]
        if not view.recent or view.recent[-1] != at:
            return False
        if view.last_evaluated is not None and at < view.last_evaluated + self.num_steps:
            return False
        earlier = view.comparison_step(self.num_steps)
        if earlier is None:
            return False
        tensor = self.base_trial.tensor(name)
        try:
            cur = scalar(tensor.value(at, mode=mode))
            prev = scalar(tensor.value(earlier, mode=mode))
        except TensorUnavailableForStep:
            return False
        if cur is None or prev is None:
            self._skipped.add(name)
            self.logger.info("%s: %s is not a scalar; not checked", self.rule_name, name)
            return False
        view.last_evaluated = at
        best = _lowest(loss.best, prev)
        loss.best = _lowest(best, cur)
        return self._judge(name, mode, at, earlier, cur, prev, best)

    def _judge(self, name: str, mode: ModeKeys, at: int, earlier: int, cur: float,
               prev: float, best: float) -> bool:
        if not cur < prev - abs(prev) * self.diff_percent / 100:
            self.logger.info("%s: %s did not decrease by %g%% from %s step %d (%g) to %d (%g)",
                             self.rule_name, name, self.diff_percent, mode.name, earlier, prev,
                             at, cur)
            return True
        if cur > best + abs(best) * self.increase_threshold_percent / 100:
            self.logger.info("%s: %s at %s step %d (%g) is more than %g%% above its lowest "
                             "value %g", self.rule_name, name, mode.name, at, cur,
                             self.increase_threshold_percent, best)
            return True
        return False


def _lowest(a: float | None, b: float) -> float:
    """The smaller of two values, ignoring a missing or NaN one."""
    if a is None or math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)
