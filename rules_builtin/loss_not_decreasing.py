"""LossNotDecreasing: a scalar loss that has not gone down enough over ``num_steps`` steps."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import partial
from typing import Any

from evaluator.errors import ConfigurationError, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import as_training, is_epoch_end_log
from evaluator.rules.kit.params import (
    Param,
    parse_bool,
    parse_float,
    parse_int,
    parse_list,
    parse_mode,
)
from evaluator.rules.kit.selection import TensorSelection, scalar
from evaluator.rules.rule import Rule
from rules_builtin._cadence import RESOLUTION_PERCENT
from rules_builtin._levels import LossView, lowest, noisy_levels, shortfalls, smooth
from rules_builtin._loss_comparison import Comparison, judge_comparison, record_clear_fall
from rules_builtin._progress import IGNORE_CONVERGED, NOISE_AWARE, LossProgress, too_few_values
from rules_builtin._running_means import RunningMeans
from rules_builtin._warmup import WarmUp
from rules_builtin.registry import register

__all__ = ["LossNotDecreasing"]

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
_PREFERRED = (EVAL, TRAIN)  # the order tried when ``mode`` is unset
_MIN_MARGIN = 0.1  # % of the level: the smallest decrease the noise test resolves


@dataclass
class _Loss:
    views: dict[ModeKeys, LossView]


@register
class LossNotDecreasing(Rule):
    """Fires at a step where a loss, compared with its value ``num_steps`` or more steps
    earlier in the same mode, did not go down by at least ``diff_percent`` %, or where it is
    more than ``increase_threshold_percent`` % above the lowest value the rule has read for it
    in that mode.

    Tensors: the union of the ``losses`` collection (when ``use_losses_collection``),
    ``collection_names`` and ``tensor_regex``; only scalar (one-element) tensors are checked.
    With ``use_losses_collection=False`` one of the other two is required.

    Modes: a loss is followed per mode, never across modes (TRAIN values are compared with
    TRAIN values only). ``num_steps`` counts MODE steps of the followed mode, never global
    steps, so interleaved EVAL steps neither stretch nor shrink it; a trial without modes
    counts as training, in global steps. With ``mode`` unset, each tensor follows the first
    of EVAL, TRAIN whose saved steps already allow a comparison (as AWS documents): the TRAIN
    loss until the EVAL loss has ``num_steps`` mode steps of history, the EVAL loss from then
    on. ``mode=GLOBAL`` means the training series; it never pools modes. Keras' epoch-end
    logs (``X`` beside ``val_X`` at an EVAL step, ``kit.modes.is_epoch_end_log``) are the
    training epoch mean, not EVAL values of ``X``: skipped. Keras' TRAIN and EVAL ``loss``
    is a running mean since the epoch (validation pass) start: each saved value is read as
    the mean of the batch losses since the previous saved value of its epoch
    (``rules_builtin._running_means``), so the mean's restart at an epoch start is never
    taken for a fall; the evidence's loss curve keeps the saved values.

    When: per tensor and mode, a step is evaluated only if a saved value at least
    ``num_steps`` mode steps earlier exists (the newest such one, the *anchor*, is the
    comparison value) and the step is at least ``num_steps`` mode steps after the last
    evaluated one; the first evaluation is the first step with an anchor, whatever the loss
    did before (a loss that never falls fires there). Saving every 3 steps with
    ``num_steps=10``, step 21 is compared with step 9 and the next evaluation is at step 33.
    Earliest firing: mode step ``num_steps`` (the first saved step ``num_steps`` after the
    first saved one); a loss that stops falling at step o fires at the first evaluation
    whose anchor is at or after o (smooth series; noisy ones when the single values there
    show no fall and the window means none beyond the noise, below), as AWS's single-value
    comparison does.

    Formula (the sources disagree; this is our choice): at an evaluation at mode step ``s``
    with anchor ``a``, ``cur`` is the mean of the values saved in ``(s - num_steps, s]``
    (a single value with sparse saves) and ``prev`` is

    * the value at ``a`` when the series is smooth: the noise of the values compared
      (``a`` and the window, ``rules_builtin._levels``) is below half of ``diff_percent``
      (at least 0.1) % of the level. Full-batch runs, a learning rate of 0, a loss stuck
      at one value: AWS's comparison, and the earliest;
    * on a noisy series (mini-batch losses, Keras' running mean), the value at ``a``
      compared with the value at ``s`` too (AWS's comparison) when those show no
      ``diff_percent`` % decrease and ``cur`` shows no decrease larger than ``diff_percent``
      plus one standard error of the difference (the noise over the counts averaged) below
      the mean of ``(a - num_steps, a]``, nor below the mean of the window before that,
      ``(a - 2 num_steps, a - num_steps]`` (unless the value at ``s`` is above the one at
      ``a`` by more than two standard errors of their difference: a jump): a plateau or a
      jump fires as early as the documented comparison, while a fall the noise cannot hide,
      in the last window or over the last two (a loss that keeps falling by less than its
      noise per window), is never called flat on one unlucky batch;
    * else the mean of the values saved in ``(a - num_steps, a]`` against ``cur``.

    ``best`` is the lowest ``prev`` or ``cur`` (window means) computed in that mode before.
    It fires if

    * ``cur >= prev - |prev| * diff_percent / 100`` (did not decrease by ``diff_percent`` %;
      an equal loss counts as not decreasing, but for 0 = 0, its floor; NaN always fires), or
    * ``cur > best + |best| * increase_threshold_percent / 100`` (``cur`` the window mean).

    Both conditions are recorded as evidence at every evaluation: "decrease (%)"
    ``100 * (prev - cur) / |prev|`` against ``diff_percent`` (fires when ``<=``; a NaN loss
    is recorded as -inf), naming the values compared and, in a firing's sentence, the noise
    and which comparison decided; and "rise (%)" ``100 * (cur - best) / |best|`` against
    ``increase_threshold_percent`` (fires when ``>``).

    With ``noise_aware=false`` this is the current AWS documentation (``diff_percent`` the
    minimum decrease): it reproduces the first 2019 test vector (first fire at 12; none when
    invoked from 13) but not the second, whose rule read ``diff_percent`` as a tolerated
    increase (docs/compatibility.md). The documented default 0.1 is used (2019: 0).

    Sparse and noisy logs (``noise_aware``, default true): a loss logged less often than
    every mode step (Hugging Face's Trainer: every 10 to 500 steps) is read on its logged
    values. Its noise is measured (``rules_builtin._cadence``: scatter around the line through
    each value's neighbours, in % of the loss's start) and ``num_steps`` grows to the mode
    steps that hold the fewest values whose window means resolve 1 % (or ``diff_percent``) at
    one standard error, at least 5 while the noise is unknown; a decrease smaller than 1 %
    then counts as none, and window medians decide (one spike never does). While the windows
    cannot fill, only a fall clear of the noise between the last two halves is a verdict; a
    log that never allows one ends "Insufficient information" naming the values needed. No
    loss is judged while a logged learning rate still rises (``rules_builtin._warmup``). A
    loss logged at every step keeps ``num_steps`` as documented.

    Diagnosis: every firing also says what the loss did (``converged``, ``not_learning``,
    ``diverging``, ``oscillating``, ``overfitting``) with the figures that decided it
    (``evaluator.rules.diagnosis``, "Diagnosing a loss-progress firing" below). With
    ``ignore_converged=true`` a ``converged`` firing is a note (logged, ``evidence.notes``),
    not an issue, and the rule goes on checking.
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections whose scalar tensors are checked."),
        Param("tensor_regex", None, "list", "Regular expressions of scalar tensors to check."),
        Param(
            "use_losses_collection",
            "True",
            "bool",
            "Also check the tensors of the losses collection.",
        ),
        Param(
            "num_steps",
            "10",
            "int",
            "Compare with the loss at least this many mode steps earlier (steps of the "
            "followed mode); evaluate every this many mode steps.",
        ),
        Param(
            "diff_percent",
            "0.1",
            "float",
            "Fire unless the loss went down by at least this percentage.",
        ),
        Param(
            "increase_threshold_percent",
            "5",
            "float",
            "Fire when the loss is more than this percentage above its lowest value.",
        ),
        Param(
            "mode",
            None,
            "mode",
            "TRAIN, EVAL or GLOBAL (= training); unset tries EVAL, then TRAIN.",
        ),
        IGNORE_CONVERGED,
        NOISE_AWARE,
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        use_losses_collection: str | bool = "True",
        num_steps: str | int = "10",
        diff_percent: str | float = "0.1",
        increase_threshold_percent: str | float = "5",
        mode: str | None = None,
        ignore_converged: str | bool = "False",
        noise_aware: str | bool = "True",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.progress = LossProgress(name, ignore_converged)
        self.noise_aware = parse_bool(name, "noise_aware", noise_aware)
        use_losses = parse_bool(name, "use_losses_collection", use_losses_collection)
        collections = parse_list(collection_names) + (["losses"] if use_losses else [])
        self.selection = TensorSelection(name, collections, tensor_regex)
        if not self.selection.given:
            raise ConfigurationError(
                f"{name} needs tensors to check: set collection_names or tensor_regex, or "
                "leave use_losses_collection true"
            )
        self.num_steps = parse_int(name, "num_steps", num_steps, minimum=1)
        self.diff_percent = parse_float(name, "diff_percent", diff_percent)
        self.increase_threshold_percent = parse_float(
            name, "increase_threshold_percent", increase_threshold_percent
        )
        self.mode = parse_mode(name, "mode", mode)
        self._wanted = [as_training(self.mode)] if self.mode is not None else list(_PREFERRED)
        self._losses: dict[str, _Loss] = {}
        self._skipped: set[str] = set()  # not scalar
        self._running = RunningMeans(base_trial)
        self._as_batches: set[str] = set()  # tensors read as Keras running means
        self._warmup = WarmUp(base_trial)

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

    def _check(
        self, name: str, step: int, raw_mode: ModeKeys, mode: ModeKeys, mode_step: int
    ) -> bool:
        if mode == EVAL and is_epoch_end_log(self.base_trial, name, step):
            return False  # the training epoch mean: not an EVAL value of this loss
        loss = self._losses.get(name)
        if loss is None:
            loss = self._losses[name] = self._start(name, step, raw_mode, mode_step)
        if name not in self._as_batches and self._running.applies(name, raw_mode):
            self._as_batches.add(name)  # told late (a live trial): the values read too
            for m, v in loss.views.items():
                self._running.convert(name, m, v.saved, v.values)
        self._follow(name, loss.views[mode], mode_step, step, raw_mode)
        if self._active_mode(loss) != mode:
            return False
        return self._evaluate(name, loss.views[mode], step, raw_mode, mode_step)

    def _start(self, name: str, step: int, raw_mode: ModeKeys, mode_step: int) -> _Loss:
        """Seed the views from the steps saved so far (once per tensor), so that a run
        started after step 0 still finds the earlier comparison steps."""
        trial = self.base_trial
        tensor = trial.tensor(name)
        views: dict[ModeKeys, LossView] = {}
        for m in self._wanted:
            view = views[m] = LossView()
            stored = GLOBAL if raw_mode == GLOBAL and m == TRAIN else m
            for s in tensor.steps(mode=stored):
                g = s if stored == GLOBAL else trial.global_step(stored, s)
                if g is None or g >= step:
                    continue
                if m == EVAL and is_epoch_end_log(trial, name, g):
                    continue
                self._follow(name, view, s, g, m)
        return _Loss(views)

    def _follow(self, name: str, view: LossView, mode_step: int, step: int, mode: ModeKeys) -> None:
        """Add a saved step to ``view``; when noise-aware, read its value for the series'
        noise and size the window from it (``LossView.resize``)."""
        view.add(mode_step, step, view.steps or self.num_steps)
        if self.noise_aware and name not in self._skipped:
            read = self._mean(name, view, [(mode_step, step)], mode)
            if read is not None and view.saved and view.saved[-1][0] == mode_step:
                view.cadence.add(mode_step, read[0])
        view.resize(self.num_steps, max(self.diff_percent, _MIN_MARGIN), self.noise_aware)

    def why_nothing_checked(self) -> str | None:
        """Why no comparison was made when the windows grew beyond the logged values
        (``evaluator.rules.coverage`` puts it in the "Insufficient information" message)."""
        views = {(n, m.name): v for n, loss in self._losses.items() for m, v in loss.views.items()}
        return too_few_values(shortfalls(views), "two windows of")

    def _active_mode(self, loss: _Loss) -> ModeKeys | None:
        if self.mode is not None:
            return as_training(self.mode)
        for m in _PREFERRED:
            view = loss.views[m]
            if view.anchor(view.steps or self.num_steps) is not None:
                return m
        return None  # wait until EVAL or TRAIN has enough history

    def _evaluate(self, name: str, view: LossView, step: int, mode: ModeKeys, at: int) -> bool:
        if not view.saved or view.saved[-1][0] != at:
            return False
        steps = view.steps or self.num_steps
        if view.last_evaluated is not None and at < view.last_evaluated + steps:
            return False
        anchor = view.anchor(steps)
        if anchor is None:
            if self.noise_aware and record_clear_fall(self, name, view, step, mode):
                view.last_evaluated = at
            return False
        window = view.window(at, steps)
        if min(len(window), len(view.window(anchor[0], steps))) < view.needed:
            # Windows too short to resolve a small decrease: only a clear fall is a verdict.
            if self.noise_aware and record_clear_fall(self, name, view, step, mode):
                view.last_evaluated = at
            return False
        if self.noise_aware and self._warmup.rising_at(step, anchor[1]):
            return False  # a window in the learning rate's warm-up (rules_builtin._warmup)
        # A noisy series resolves no decrease below RESOLUTION_PERCENT: none counts.
        diff, grown = self.diff_percent, self.noise_aware and view.needed > 1
        if grown:
            diff = max(diff, RESOLUTION_PERCENT)
        current = self._mean(name, view, window, mode)
        single = None if name in self._skipped else self._mean(name, view, [anchor], mode)
        if name in self._skipped or current is None or single is None:
            return False
        # The anchor's value alone on a smooth series (AWS's comparison, and the earliest);
        # on a noisy one as well unless the window means show a decrease the noise cannot
        # explain (rules_builtin._levels), else the window means decide.
        read = [v for _, g in [anchor, *window] if (v := view.values.get(g)) is not None]
        is_smooth, noise = smooth(read, max(self.diff_percent, _MIN_MARGIN))
        previous: tuple[float, int, int] | None = single
        decided = (current, single)
        if not is_smooth:
            reader = partial(self._mean, name, view, mode=mode)
            noisy = noisy_levels(
                reader, view, (anchor, window, steps), single, (noise, diff), grown
            )
            if noisy is None:
                return False
            current, previous, decided = noisy
        if name in self._skipped or previous is None:
            return False
        view.last_evaluated = at
        best = lowest(view.best, previous[0])
        view.best = lowest(best, current[0])
        # Which comparison decided, and why (the noise measured on the values compared).
        keras = name in self._as_batches
        why = (
            ("Keras' running means read as their batches' means; " if keras else "")
            + (f"noise {noise:.2g}% of the level: ")
            + (
                "the anchor's value"
                if is_smooth
                else "the single values, the window means showing no decrease beyond the noise "
                "over the last window or the last two"
                if decided[1] is single
                else "the window ending at the anchor"
            )
        )
        made = Comparison(name, step, mode, at, decided, best, current, why, diff)
        return judge_comparison(self, made)

    def _mean(
        self,
        name: str,
        view: LossView,
        window: list[tuple[int, int]],
        mode: ModeKeys,
        *,
        median: bool = False,
    ) -> tuple[float, int, int] | None:
        """(mean value, or the median, first mode step, last mode step) of the saved values
        in ``window``; None when none of them can be read. A tensor that is not a scalar is
        skipped from then on."""
        tensor = self.base_trial.tensor(name)
        total, count, first, last = 0.0, 0, None, None
        found: list[float] = []
        for mode_step, g in window:
            if g not in view.values:
                try:
                    raw = tensor.value(g)
                except TensorUnavailableForStep:
                    continue
                value = scalar(raw)
                if value is None:
                    self._skipped.add(name)
                    self.logger.info("%s: %s is not a scalar; not checked", self.rule_name, name)
                    return None
                view.values[g] = value
                if name in self._as_batches:  # Keras: the batches' mean instead
                    batches = self._running.batch_mean(name, mode, mode_step, g)
                    view.values[g] = value if batches is None else batches
                self.progress.saw(name, g, value)
                # The curve behind the verdict: the loss itself, per mode.
                self.evidence.record(g, name, quantity="loss", value=value, mode=mode)
            total += view.values[g]  # type: ignore[operator]
            found.append(view.values[g])  # type: ignore[arg-type]
            count += 1
            first = mode_step if first is None else first
            last = mode_step
        if not count:
            return None
        level = statistics.median(found) if median else total / count
        return level, first, last  # type: ignore[return-value]
