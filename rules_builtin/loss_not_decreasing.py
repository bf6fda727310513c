"""LossNotDecreasing: a scalar loss that has not gone down enough over ``num_steps`` steps."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any


from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.rule import Rule
from evaluator.rules.evidence import SelectionHint
from rules_builtin._modes import as_training, is_epoch_end_log
from rules_builtin._params import Param, parse_bool, parse_float, parse_int, parse_list, parse_mode
from rules_builtin._select import TensorSelection, scalar
from rules_builtin.registry import register

__all__ = ["LossNotDecreasing"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
_PREFERRED = (EVAL, TRAIN)  # the order tried when ``mode`` is unset


@dataclass
class _View:
    """One loss tensor's saved steps in one mode, as (mode step, global step) pairs; only the
    steps a comparison can still need are kept. ``best`` is the lowest value read in this
    mode (never another mode's)."""

    recent: deque[tuple[int, int]] = field(default_factory=deque)
    last_evaluated: int | None = None
    best: float | None = None

    def add(self, mode_step: int, step: int, num_steps: int) -> None:
        if self.recent and mode_step <= self.recent[-1][0]:
            return
        self.recent.append((mode_step, step))
        while len(self.recent) >= 2 and self.recent[1][0] <= mode_step - num_steps:
            self.recent.popleft()

    def comparison(self, num_steps: int) -> tuple[int, int] | None:
        """The newest saved (mode step, global step) at least ``num_steps`` mode steps before
        the newest one."""
        if not self.recent or self.recent[0][0] > self.recent[-1][0] - num_steps:
            return None
        return self.recent[0]


@dataclass
class _Loss:
    views: dict[ModeKeys, _View]


@register
class LossNotDecreasing(Rule):
    """Fires at a step where a loss, compared with its value ``num_steps`` or more steps
    earlier in the same mode, did not go down by at least ``diff_percent`` %, or where it is
    more than ``increase_threshold_percent`` % above the lowest value the rule has read for it
    in that mode.

    Tensors: the union of the ``losses`` collection (when ``use_losses_collection``),
    ``collection_names`` and ``tensor_regex``; only scalar (one-element) tensors are checked.
    With ``use_losses_collection=False`` one of the other two is required.

    Modes: a loss is followed per mode, never across modes: a TRAIN value is compared only
    with TRAIN values and with the lowest TRAIN value, an EVAL value only with EVAL values.
    ``num_steps`` is a distance in MODE steps of the followed mode (TRAIN step 0, 1, 2 … as
    the hook numbers them), never in global steps, so EVAL steps interleaved in the global
    counter neither stretch nor shrink the window. A trial without modes (every step GLOBAL)
    counts as training, in global steps. With ``mode`` unset, each tensor follows the first
    of EVAL, TRAIN whose saved steps already allow a comparison (as AWS documents); so a
    job's TRAIN loss is checked until its EVAL loss has ``num_steps`` mode steps of history,
    and the EVAL loss from then on. ``mode=GLOBAL`` means the training series (TRAIN steps,
    or the GLOBAL steps of a trial without modes); it never pools modes.

    Keras' epoch-end logs: at an EVAL step where both ``X`` and ``val_X`` are saved, ``X`` is
    the training epoch mean (``rules_builtin._modes.is_epoch_end_log``); it is not a value of
    the EVAL series of ``X`` and is skipped (it has no TRAIN mode step either, and the TRAIN
    series already holds the same value at the epoch's last TRAIN step).

    When: per tensor and mode, a step is evaluated only if a saved value at least
    ``num_steps`` mode steps earlier exists (the newest such one is the comparison value) and
    the step is at least ``num_steps`` mode steps after the last evaluated one. Saving every
    3 steps with ``num_steps=10``, step 21 is compared with step 9 and the next evaluation is
    at step 33. A step without such history is not a comparison and is not recorded.

    Formula (the sources disagree; this is our choice): with ``prev`` the comparison value,
    ``cur`` the current one and ``best`` the lowest value of the same mode read before
    ``cur`` (at evaluations and their comparison steps), it fires if

    * ``cur >= prev - |prev| * diff_percent / 100`` (did not decrease by ``diff_percent`` %;
      an equal loss counts as not decreasing; a NaN loss always fires), or
    * ``cur > best + |best| * increase_threshold_percent / 100`` (has risen more than
      ``increase_threshold_percent`` % above its best, even if it went down since the last
      comparison).

    Both conditions are recorded as evidence at every evaluation: "decrease (%)"
    ``100 * (prev - cur) / |prev|`` against ``diff_percent`` (fires when ``<=``; a NaN loss
    is recorded as -inf) and "rise above lowest (%)" ``100 * (cur - best) / |best|`` against
    ``increase_threshold_percent`` (fires when ``>``).

    Keras' ``loss`` is a running mean that resets every epoch (a sawtooth). Comparing single
    values ``num_steps`` mode steps apart follows the AWS definition; on the real Keras and
    PyTorch trials in tests/fixtures/hook_trials the healthy Keras run stays quiet with the
    defaults and the learning-rate-0 run fires.

    This follows the current AWS documentation, where ``diff_percent`` is the minimum
    decrease. It reproduces the first 2019 test vector (losses 0.30, 0.33, 0.31, 0.30, 0.28
    at steps 0, 4, 8, 12, 16: first fire at 12, equal to step 0; invoked from step 13, no
    fire, as 16 went down from 4). It does not reproduce the second: with ``diff_percent=20``
    it fires at 12 (no 20 % decrease since step 0) and again at 24, where the 2019 rule first
    fired at 24, because that implementation treated ``diff_percent`` as a tolerated
    *increase*. The 2019 default ``diff_percent`` was 0; the documented default 0.1 is used.
    """

    RECORDS_COMPARISONS = True

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections whose scalar tensors are checked."),
        Param("tensor_regex", None, "list", "Regular expressions of scalar tensors to check."),
        Param("use_losses_collection", "True", "bool",
              "Also check the tensors of the losses collection."),
        Param("num_steps", "10", "int",
              "Compare with the loss at least this many mode steps earlier (steps of the "
              "followed mode); evaluate every this many mode steps."),
        Param("diff_percent", "0.1", "float",
              "Fire unless the loss went down by at least this percentage."),
        Param("increase_threshold_percent", "5", "float",
              "Fire when the loss is more than this percentage above its lowest value."),
        Param("mode", None, "mode",
              "TRAIN, EVAL or GLOBAL (= training); unset tries EVAL, then TRAIN."),
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
        self._wanted = [as_training(self.mode)] if self.mode is not None else list(_PREFERRED)
        self._losses: dict[str, _Loss] = {}
        self._skipped: set[str] = set()  # not scalar

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        raw_mode, mode_step = self.base_trial.mode_modestep(step)
        if raw_mode is None or mode_step is None:
            return False
        mode = as_training(raw_mode)
        if mode not in self._wanted:
            return False
        fired = False
        for name in self.selection.names(self.base_trial, step=step):
            if name not in self._skipped:
                fired = self._check(name, step, raw_mode, mode, mode_step) or fired
        return fired

    # ---------------------------------------------------------------- one tensor

    def _check(self, name: str, step: int, raw_mode: ModeKeys, mode: ModeKeys,
               mode_step: int) -> bool:
        if mode == EVAL and is_epoch_end_log(self.base_trial, name, step):
            return False  # the training epoch mean: not an EVAL value of this loss
        loss = self._losses.get(name)
        if loss is None:
            loss = self._losses[name] = self._start(name, step, raw_mode, mode_step)
        loss.views[mode].add(mode_step, step, self.num_steps)
        if self._active_mode(loss) != mode:
            return False
        return self._evaluate(name, loss.views[mode], step, raw_mode, mode_step)

    def _start(self, name: str, step: int, raw_mode: ModeKeys, mode_step: int) -> _Loss:
        """Seed the views from the steps saved so far (once per tensor), so that a run
        started after step 0 still finds the earlier comparison steps."""
        trial = self.base_trial
        tensor = trial.tensor(name)
        views: dict[ModeKeys, _View] = {}
        for m in self._wanted:
            view = views[m] = _View()
            stored = GLOBAL if raw_mode == GLOBAL and m == TRAIN else m
            for s in tensor.steps(mode=stored):
                g = s if stored == GLOBAL else trial.global_step(stored, s)
                if g is None or g >= step:
                    continue
                if m == EVAL and is_epoch_end_log(trial, name, g):
                    continue
                view.add(s, g, self.num_steps)
        return _Loss(views)

    def _active_mode(self, loss: _Loss) -> ModeKeys | None:
        if self.mode is not None:
            return as_training(self.mode)
        for m in _PREFERRED:
            if loss.views[m].comparison(self.num_steps) is not None:
                return m
        return None  # wait until EVAL or TRAIN has enough history

    def _evaluate(self, name: str, view: _View, step: int, mode: ModeKeys,
                  at: int) -> bool:
        if not view.recent or view.recent[-1][0] != at:
            return False
        if view.last_evaluated is not None and at < view.last_evaluated + self.num_steps:
            return False
        earlier = view.comparison(self.num_steps)
        if earlier is None:
            return False
        tensor = self.base_trial.tensor(name)
        try:
            cur = scalar(tensor.value(step))
            prev = scalar(tensor.value(earlier[1]))
        except TensorUnavailableForStep:
            return False
        if cur is None or prev is None:
            self._skipped.add(name)
            self.logger.info("%s: %s is not a scalar; not checked", self.rule_name, name)
            return False
        view.last_evaluated = at
        best = _lowest(view.best, prev)
        view.best = _lowest(best, cur)
        return self._judge(name, step, mode, at, earlier[0], cur, prev, best)

    def _judge(self, name: str, step: int, mode: ModeKeys, at: int, earlier: int, cur: float,
               prev: float, best: float) -> bool:
        where = f"{mode.name} step {at} (global step {step})" if mode != GLOBAL \
            else f"step {at}"
        decrease = _percent(prev - cur, prev)
        if math.isnan(cur) or math.isnan(prev):
            decrease = -math.inf  # a NaN loss has not decreased
        not_decreasing = self.evidence.compare(
            step, name, quantity=f"decrease (%) since {mode.name} step {earlier}",
            value=decrease, parameter="diff_percent", threshold=self.diff_percent,
            fires_when="<=", mode=mode, mode_step=at,
            sentence=(f"{self.rule_name}: {name} did not decrease by {self.diff_percent:g}% "
                      f"from {mode.name} step {earlier} ({prev:g}) to {where} ({cur:g})"))
        rise = _percent(cur - best, best)
        risen = self.evidence.compare(
            step, name, quantity=f"rise (%) above the lowest {mode.name} value",
            value=rise, parameter="increase_threshold_percent",
            threshold=self.increase_threshold_percent, fires_when=">", mode=mode, mode_step=at,
            sentence=(f"{self.rule_name}: {name} at {where} ({cur:g}) is more than "
                      f"{self.increase_threshold_percent:g}% above its lowest {mode.name} "
                      f"value {best:g}"))
        return not_decreasing or risen


def _percent(difference: float, base: float) -> float:
    """``100 * difference / |base|``; +-inf (or 0) when ``base`` is 0."""
    if base == 0:
        if difference == 0 or math.isnan(difference):
            return 0.0 if difference == 0 else math.nan
        return math.copysign(math.inf, difference)
    return 100.0 * difference / abs(base)


def _lowest(a: float | None, b: float) -> float:
    """The smaller of two values, ignoring a missing or NaN one."""
    if a is None or math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)
