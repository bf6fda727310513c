"""Overfit: the validation loss pulling away from the training loss."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import OVERFITTING, Diagnosis
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import (
    VALIDATION_PREFIX,
    epoch_end_pair,
    is_epoch_end_log,
    pass_ended,
    value_in_mode,
)
from evaluator.rules.kit.params import Param, parse_bool, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection, percent_of
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._phase_means import PhaseMeans, gap_ratio, lowest_of
from rules_builtin._progress import IGNORE_CONVERGED, NOISE_AWARE, LossProgress
from rules_builtin._validation_rise import record_not_risen, risen_diagnosis
from rules_builtin.registry import register

__all__ = ["Overfit"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


# A validation mean this much (1 %) below the best earlier pass's is still falling.
_FALLING = 0.01


@register
class Overfit(Rule):
    """Fires where, for a loss, ``(val - train) / train > ratio_threshold`` (default 0.1) for
    ``patience`` (default 1) consecutive judged validation passes of that loss, once the
    validation loss has stopped falling: a pass whose mean is more than 1 % below the best
    earlier pass's (or that has no earlier pass) is a gap, not overfitting, and does not count
    (its evidence is that fall against 1 %). A healthy network with BatchNorm or dropout keeps
    its validation loss well above a training loss that falls towards 0 while both fall
    (pytorch_resnet_healthy: ratios 0.32, 2.7, 1.2, 0.65, validation 0.82 -> 0.007); the
    overfitting it warns of is the validation loss no longer improving while training does.

    A validation pass (a run of consecutive EVAL steps) is judged once it is complete: at the
    first non-EVAL step after it, which is where it fires, or, when the data ends with it, at
    its last EVAL step (if training ended or the next saved step is not EVAL; a pass cut by
    ``end_step`` is not judged). A half-finished pass is never judged. ``val`` is the mean of
    the loss over the pass and ``train`` its mean over the latest training phase (the run of
    TRAIN steps before it): the SAME tensor in both modes,
    as smdebug's hooks save it, never values of different modes pooled together. Comparing
    phase means, not single values, keeps one noisy batch from firing; PREDICT steps and
    steps of a trial without modes are ignored, and a ratio is undefined (not counted either
    way) until both phases have a value or when the training mean is 0. The streak counts
    judged passes and restarts at one within the threshold; NaN ratios do
    not count as above it.

    Keras' epoch-end logs (``evaluator.rules.kit.modes.is_epoch_end_log``): at an EVAL step where
    both ``X`` and ``val_X`` are saved, ``X`` is the training epoch mean, so it never enters
    the validation mean. That step instead gives the exact pair Keras computed: ``val =
    val_X`` (the validation mean) and ``train = X`` (the training epoch mean), and the ratio
    is judged from them. Keras' per-step ``X`` is a running mean that resets every epoch, so
    phase means of it are biased; once a loss has shown an epoch-end log, it is judged only
    at its epoch-end logs (one judgement per epoch, which ``patience`` then counts). Before
    the first one (the first validation pass) the phase means are used.

    Windows and the earliest firing: one validation pass against the training phase before
    it, no moving mean across passes; the earliest firing is at the step after the first
    validation pass that follows a training phase (Keras: its first epoch-end log). Measured
    (bench/DETECTION.md, default parameters): keras_overfit fires at step 19, pytorch_overfit
    at 36, the numpy overfit run at 8, none later than the latest documented reading of "the
    mean" (pass means, cumulative means from ``start_step``, Keras epoch-end logs:
    bench/allowed/), which is 19, 58 and 27 there.

    Evidence: each judgement records the ratio against ``ratio_threshold``; with
    ``patience`` > 1 a ratio above it is recorded as the count of consecutive passes
    above it against ``patience``.

    Tensors: those matching ``tensor_regex``; without it, the ``losses`` collection, or every
    tensor when the trial has no ``losses`` collection. Only scalar (one-element) tensors are
    compared.

    Noisy validation passes (``noise_aware``, default true): the passes' noise is measured
    (``rules_builtin._cadence``). On smooth passes a pass is still falling when it is below
    the best earlier pass by more than that noise (AWS, and ``noise_aware=false``: 1 %). On
    noisy ones (a Whisper fine-tune's evaluations move 3 to 8 % while their trend falls) a
    gap counts only once the validation loss has risen from its lowest: a mean of the last
    ``k`` passes (``k`` from 2 to 5, the fewest that show it) above the lowest earlier mean
    of ``k`` by more than 1.5 standard errors and 5 % of it (``rules_builtin._validation_rise``;
    on the 51 wild-hf-dev runs that catches all 7 overfit runs and fires on no healthy one).
    Such a firing is diagnosed ``overfitting`` unless the training loss rose too.

    Steps before ``start_step`` (a global step) are ignored. The evaluator consumes a
    ``start_step`` RuleParameter itself and never visits earlier steps, which has the same
    effect.

    Diagnosis: every firing also says what the loss did: ``converged``, ``not_learning``,
    ``diverging``, ``oscillating`` or ``overfitting``, with the figures that decided it (fall
    since the start, recent trend, noise measured on the series), in the reason's
    ``diagnosis``, ``explanation`` and ``diagnosis_figures`` and at the end of its sentence.
    How each is decided: ``evaluator.rules.diagnosis`` ("Diagnosing a loss-progress firing"
    below). With ``ignore_converged=true`` a firing diagnosed ``converged`` is a note (a
    ``rule_note`` log line, ``evidence.notes`` in the result file), not an issue, and the
    rule goes on checking: a later firing with any other diagnosis still fires.
    """

    PARAMETERS = (
        Param(
            "tensor_regex",
            None,
            "list",
            "Regular expressions of the loss tensors; default: the losses collection.",
        ),
        Param("start_step", "0", "int", "First global step compared."),
        Param(
            "patience",
            "1",
            "int",
            "Consecutive judged validation passes above the threshold needed to fire.",
        ),
        Param(
            "ratio_threshold",
            "0.1",
            "float",
            "Fire when (validation - training) / training exceeds this.",
        ),
        IGNORE_CONVERGED,
        NOISE_AWARE,
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | None = None,
        start_step: str | int = "0",
        patience: str | int = "1",
        ratio_threshold: str | float = "0.1",
        ignore_converged: str | bool = "False",
        noise_aware: str | bool = "True",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.progress = LossProgress(name, ignore_converged)
        self.noise_aware = parse_bool(name, "noise_aware", noise_aware)
        self.selection = TensorSelection(name, None, tensor_regex)
        self._losses = TensorSelection(name, ["losses"], None)
        self.start_step = parse_int(name, "start_step", start_step, minimum=0)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.ratio_threshold = parse_float(name, "ratio_threshold", ratio_threshold)
        self._means: dict[str, PhaseMeans] = {}
        self._last_step: int | None = None
        self._skipped: set[str] = set()  # not scalar

    def selection_hints(self) -> list[SelectionHint]:
        hint = self.selection.hint() if self.selection.given else self._losses.hint()
        return [
            dataclasses.replace(
                hint,
                advice="save the loss in both TRAIN and EVAL mode (Overfit "
                "compares a loss's validation phases with its training phases)",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        if step < self.start_step:
            return False
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode is None or mode_step is None:
            return False
        self._last_step = step
        fired = False
        if mode != EVAL:  # a validation pass before this step is complete: judge it
            for name, means in self._means.items():
                if self._close(name, means, step, mode, mode_step):
                    fired = True
        if mode not in (TRAIN, EVAL):
            return fired
        for name in self._names(step):
            means = self._means.setdefault(name, PhaseMeans())
            if mode == EVAL:
                pair = epoch_end_pair(self.base_trial, name, step, not_scalar=self._skipped)
                if pair is not None:
                    self.progress.saw(name, step, pair[0])  # the training epoch mean
                    self.progress.saw(VALIDATION_PREFIX + name, step, pair[1])
                    self.evidence.record(step, name, quantity="loss", value=pair[0], mode=TRAIN)
                    self.evidence.record(step, name, quantity="loss", value=pair[1], mode=EVAL)
                    means.epoch_logs = True
                    means.val_open = False  # the pair judges this pass
                    if self._judge(
                        name, means, gap_ratio(*pair), pair, step, EVAL, mode_step, "epoch-end logs"
                    ):
                        fired = True
                    continue
                if is_epoch_end_log(self.base_trial, name, step):
                    continue  # the training epoch mean: not a validation value
            if means.epoch_logs:
                continue  # a Keras running mean: judged at its epoch-end logs only
            value = value_in_mode(self.base_trial, name, step, mode, not_scalar=self._skipped)
            if value is None:
                continue
            self.progress.saw(name, step, value)
            # The curve behind the verdict: training and validation loss, per mode.
            self.evidence.record(step, name, quantity="loss", value=value, mode=mode)
            means.add(mode, value, mode_step, step)
        return fired

    def invoke_at_end(self) -> int | None:
        """The data has ended: judge a validation pass still under way if it is complete
        (training ended after it, or the next saved step is not an EVAL step); it fires at
        its last EVAL step."""
        trial = self.base_trial
        last = self._last_step
        if last is None or trial.mode(last) != EVAL:
            return None
        if not pass_ended(trial, last):
            return None
        fired_at = None
        for name, means in self._means.items():
            last_step = means.val_last_step
            if (
                means.val_open
                and last_step is not None
                and self._close(name, means, last_step, EVAL, means.val_last)
            ):
                fired_at = last_step if fired_at is None else min(fired_at, last_step)
        return fired_at

    def _close(
        self, name: str, means: PhaseMeans, step: int, mode: ModeKeys, mode_step: int | None
    ) -> bool:
        if name in self._skipped or means.epoch_logs or not means.val_open:
            means.val_open = False
            return False
        first, last = means.val_first, means.val_last
        train = (means.train_first, means.train_last)
        pair = means.close()
        ratio = gap_ratio(*pair) if pair is not None else None
        kind = (
            f"means of the validation pass at EVAL steps {first}..{last} and the training "
            f"phase at TRAIN steps {train[0]}..{train[1]}"
        )
        return self._judge(name, means, ratio, pair, step, mode, mode_step, kind)

    def _names(self, step: int) -> list[str]:
        trial = self.base_trial
        if self.selection.given:
            names = self.selection.names(trial, step=step)
        elif "losses" in trial.collections():
            names = self._losses.names(trial, step=step)
        else:
            names = trial.tensor_names(step=step)
        return [n for n in names if n not in self._skipped]

    def _falling(self, means: PhaseMeans) -> float:
        """How far (a fraction) below its best earlier pass a smooth validation mean must be
        to be still falling: 1 % as documented, or, noise-aware, its noise (any fall the
        noise cannot make)."""
        return means.rise.fall_margin() if self.noise_aware else _FALLING

    def _gap_not_yet(
        self,
        name: str,
        means: PhaseMeans,
        judged: tuple[float, float, float | None],
        noisy: bool,
        where: tuple[int, ModeKeys, int | None],
        quantity: str,
    ) -> bool:
        """Whether a gap above the threshold is not overfitting yet, recorded as why: on noisy
        passes, the validation loss has not risen beyond its noise; on smooth ones, it still
        falls below its best earlier pass (or has none to fall from)."""
        ratio, val, best = judged
        step, mode, mode_step = where
        if noisy:
            if means.rise.risen():
                return False
            record_not_risen(self.evidence, means.rise, name, ratio, where)
            return True
        falling = self._falling(means)
        if best is not None and not val < best - abs(best) * falling:
            return False
        self.evidence.compare(
            step,
            name,
            quantity=f"fall (%) of the validation mean below its best earlier pass, "
            f"{quantity} being {ratio:.3g}",
            value=math.inf if best is None else percent_of(best - val, best),
            parameter="validation still falling",
            threshold=(_FALLING if best is None else falling) * 100,
            fires_when="<=",
            mode=mode,
            mode_step=mode_step,
        )
        return True

    def _judge(
        self,
        name: str,
        means: PhaseMeans,
        ratio: float | None,
        pair: tuple[float, float] | None,
        step: int,
        mode: ModeKeys,
        mode_step: int | None,
        kind: str,
    ) -> bool:
        if ratio is None or pair is None:
            return False
        train, val = pair
        quantity = f"(validation - training) / training ({kind})"
        best, means.val_best = means.val_best, lowest_of(means.val_best, val)
        if means.val_best == val:
            means.train_at_best = train
        if self.noise_aware:
            means.rise.add(val)
        noisy = self.noise_aware and not means.rise.smooth()
        where = (step, mode, mode_step)
        if ratio > self.ratio_threshold and self._gap_not_yet(
            name, means, (ratio, val, best), noisy, where, quantity
        ):
            means.streak = 0
            return False
        above = ratio > self.ratio_threshold
        means.streak = means.streak + 1 if above else 0
        sentence = (
            f"{self.rule_name}: {name} validation/training ratio {ratio:g} "
            f"(validation {val:g}, training {train:g}, {kind}) > "
            f"{self.ratio_threshold:g} for {means.streak} validation pass(es), judged "
            f"at {step_words(self.base_trial, step, mode, mode_step)}"
        )
        validation = VALIDATION_PREFIX + name if means.epoch_logs else name

        def diagnose() -> Diagnosis:
            found = self.progress.diagnose(self.base_trial, validation, EVAL, step)
            if found.kind == OVERFITTING or best is None:
                return found
            if not noisy and not means.rise.rose_once(best, val):
                return found  # the whole-curve reading, unless a rise beyond noise decided
            return risen_diagnosis(found, (best, val), (means.train_at_best, train))

        if self.patience == 1 or not above:
            return self.evidence.compare(
                step,
                name,
                quantity=quantity,
                value=ratio,
                parameter="ratio_threshold",
                threshold=self.ratio_threshold,
                fires_when=">",
                mode=mode,
                mode_step=mode_step,
                sentence=sentence,
                diagnose=diagnose,
            )
        return self.evidence.compare(
            step,
            name,
            quantity=f"consecutive validation passes with {quantity} > {self.ratio_threshold:g}",
            value=means.streak,
            parameter="patience",
            threshold=self.patience,
            fires_when=">=",
            mode=mode,
            mode_step=mode_step,
            sentence=sentence,
            diagnose=diagnose,
        )
