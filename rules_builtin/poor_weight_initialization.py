"""PoorWeightInitialization: signs, in the first training steps, of badly initialised weights."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_int, parse_regex
from evaluator.rules.kit.selection import TensorSelection, listed, percent_of
from evaluator.rules.kit.windows import WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin._activations import ActivationFinder
from rules_builtin._levels import smooth
from rules_builtin._running_means import RunningMeans
from rules_builtin.registry import register

TRAIN = ModeKeys.TRAIN
_TRAINING = (ModeKeys.TRAIN, ModeKeys.GLOBAL)
_MIN_MARGIN = 0.1  # % of the level: the smallest decrease the noise test resolves


@register
class PoorWeightInitialization(Rule):
    """Fires at a training step s among the first ``steps`` (mode step < ``steps``) when any
    of three checks holds at s:

    1. **Activation variances.** Of the activation inputs saved at s (one per layer), with at
       least two of them: the largest variance divided by the smallest is above
       ``threshold``. The tensors are those matching ``activation_inputs_regex``; by default,
       the ReLU layer inputs the trial holds, found by name and by value as DeadRelu finds
       ReLU outputs (SageMaker's ``.*relu_input``, Keras ``re_lu/inputs``, PyTorch
       ``relu1_input_0``, a ``relu_input`` collection). For a Keras
       ``Dense(activation="relu")`` the variance is that of the function's input,
       ``inputs @ kernel + bias`` from the weights saved at s, not of the layer's saved
       inputs. A zero smallest variance with a non-zero largest one
       counts as an infinite ratio; all variances zero says nothing.
    2. **Gradient spread.** For some tensor of the ``gradients`` collection saved at s with a
       raw value of at least 2 elements, the 95th minus the 5th percentile of its values is
       below ``distribution_range``. Checked per tensor (the AWS documentation speaks of the
       minimum spread), so one layer with a collapsed gradient distribution is enough.
    3. **Loss not decreasing.** For some size-1 tensor of the ``losses`` collection, the mean
       of its values saved in the last ``patience`` training steps (s - patience, s] is not
       below the loss ``patience`` steps earlier: on a smooth series (a loss stuck at one
       value, a full-batch run: ``rules_builtin._levels``) the value at the newest saved
       step <= s - patience, from s = patience on (the earliest any reading of "the loss
       not decreasing within patience steps" allows); on a noisy one the mean of the
       ``patience`` steps before, (s - 2 patience, s - patience], from s = 2 patience - 1
       on. Means on noisy series: Keras saves a running mean whose first value of an epoch
       is one batch's loss, below the running means that follow on a healthy run, and
       PyTorch saves single noisy batches (the lowest-single-value test fired at step 5 of
       healthy Keras runs). Keras' running means are read as the batch means behind them
       (``rules_builtin._running_means``, as LossNotDecreasing reads them): a running mean
       is smooth by construction, and one low first batch made a healthy real Keras run
       fire at step 5 (1.071 over steps 1..5 against 1.001 at step 0). A NaN in the newer window is never a decrease; a NaN only in
       the older one is. Earliest firing: training step ``patience`` (step 0 for the other
       two checks).

    Choices: training steps are TRAIN steps, or every step of a trial without modes, counted
    in TRAIN mode steps; EVAL/PREDICT steps are not evaluated. ``activation_inputs_regex`` is
    one regular expression (``re.search``, not split at commas). Each check is recorded in the
    rule's evidence: the variance ratio against ``threshold``, each gradient's percentile
    spread against ``distribution_range``, and each loss's decrease (%) between the two
    windows against 0 ("loss decrease required (%)"). Variances are the saved
    ``variance`` reduction, else numpy's (ddof=0) of the raw value. After the first ``steps``
    training steps the rule reads nothing and never fires. Steps are assumed to be visited in
    increasing order (as ``invoke_rule`` does); a step at or before the previous one forgets
    the losses seen.
    """

    PARAMETERS = (
        Param(
            "activation_inputs_regex",
            None,
            "str",
            "Regular expression selecting the activation inputs, one tensor per layer; "
            "default: the ReLU layer inputs, found by name and by value.",
        ),
        Param(
            "threshold",
            "10.0",
            "float",
            "Fire when the largest / smallest variance of activation inputs is above this.",
        ),
        Param(
            "distribution_range",
            "0.001",
            "float",
            "Fire when a gradient's 95th - 5th percentile is below this.",
        ),
        Param(
            "patience",
            "5",
            "int",
            "Fire when the loss's mean over this many training steps is not below its mean "
            "over the as many steps before.",
        ),
        Param("steps", "10", "int", "How many training steps, from the first, are checked."),
    )

    def __init__(
        self,
        base_trial: Any,
        activation_inputs_regex: str | None = None,
        threshold: str | float = "10.0",
        distribution_range: str | float = "0.001",
        patience: str | int = "5",
        steps: str | int = "10",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.activation_inputs_regex = (
            None
            if activation_inputs_regex is None
            else parse_regex(name, "activation_inputs_regex", activation_inputs_regex)
        )
        self.finder = ActivationFinder(base_trial)
        self.threshold = parse_float(name, "threshold", threshold)
        self.distribution_range = parse_float(name, "distribution_range", distribution_range)
        self.patience = parse_int(name, "patience", patience, minimum=1)
        self.steps = parse_int(name, "steps", steps, minimum=1)
        self.gradients = TensorSelection(
            name, default_collections=["gradients"], all_when_empty=False
        )
        self.losses = TensorSelection(name, default_collections=["losses"], all_when_empty=False)
        # loss -> (mode step, value) of the last 2 * patience training steps (the two windows)
        self._losses: dict[str, deque[tuple[int, float]]] = {}
        self._running = RunningMeans(base_trial)
        self._last_step: int | None = None
        # Variances and percentile spreads of a window of steps at once where the trial has
        # a batch read, else of the step alone: its reduction_value (the hook's saved
        # variance where it saved it), its value's percentiles.
        self._variances = WindowedRows(base_trial, _row_variances, reduction=("variance", False))
        self._spreads = WindowedRows(
            base_trial, _row_spreads, dtypes=_SPREAD_DTYPES, alone_dtypes=_NUMBERS
        )

    def selection_hints(self) -> list[SelectionHint]:
        activations = (
            SelectionHint(
                f"activation_inputs_regex {self.activation_inputs_regex.pattern!r}",
                (self.activation_inputs_regex.pattern,),
                "activation_inputs_regex",
            )
            if self.activation_inputs_regex is not None
            else SelectionHint(
                "the ReLU layer inputs (by name and by value)",
                ("relu_input", "relu"),
                "activation_inputs_regex",
            )
        )
        return [
            activations,
            replace(
                self.gradients.hint(parameter=None),
                advice="save the gradients and losses collections with the hook",
            ),
            self.losses.hint(parameter=None),
        ]

    def invoke_at_step(self, step: int) -> bool:
        if self._last_step is not None and step <= self._last_step:
            self._losses.clear()  # a new walk over the steps
        self._last_step = step
        mode, mode_step = self.base_trial.mode_modestep(step)
        if mode not in _TRAINING or mode_step is None or mode_step >= self.steps:
            return False
        # Every check runs, even after a hit, so the evidence is complete.
        fired = self._activation_variances(step)
        fired = self._gradient_spread(step) or fired
        return self._loss_not_decreasing(step, mode_step) or fired

    def _activation_inputs(self, step: int) -> list[str]:
        if self.activation_inputs_regex is None:
            return self.finder.tensors("relu", "inputs", step)
        names = self.base_trial.tensor_names(step=step)
        found = self.activation_inputs_regex.matching(names)  # one lookup for all the names
        return [n for n in names if n in found]

    def _activation_variances(self, step: int) -> bool:
        variances = {}
        names = self._activation_inputs(step)
        for name in names:
            if self.activation_inputs_regex is None and self.finder.needs_weights(name):
                pre = self.finder.input_value(name, step)  # a Dense layer's x @ kernel + bias
                if pre is not None and pre.size and np.isfinite(pre).all():
                    variances[name] = float(np.var(pre))
                continue
            variance = self._variance(name, step, names)
            if variance is not None:
                variances[name] = variance
        if len(variances) < 2:
            return False
        largest, smallest = max(variances.values()), min(variances.values())
        if largest == 0:
            return False
        ratio = largest / smallest if smallest > 0 else math.inf
        return self.evidence.compare(
            step,
            sorted(variances),
            quantity="largest / smallest activation-input variance",
            value=ratio,
            parameter="threshold",
            threshold=self.threshold,
            fires_when=">",
            sentence=lambda: (
                f"{self.rule_name}: the variances of the activation inputs differ by a "
                f"factor {ratio:.3g} (> threshold={self.threshold:g}) at {step_words(self.base_trial, step)}: "
                f"{listed(sorted(variances))}"
            ),
        )

    def _variance(self, name: str, step: int, names: list[str]) -> float | None:
        """``name``'s variance at ``step`` (a window's, else reduction_value); None where
        there is none, it is NaN or not of numbers."""
        try:
            found = self._variances.get(name, step, names)
        except TypeError:
            return None  # strings: numpy has no variance of them
        if found is None or np.asarray(found).dtype.kind not in "iuf" or math.isnan(found):
            return None
        return float(found)

    def _gradient_spread(self, step: int) -> bool:
        fired = False
        names = self.gradients.names(self.base_trial, step=step)
        for name in names:
            spread = self._spreads.get(name, step, names)
            if spread is None:
                continue  # no raw value, not numbers, or fewer than two values
            if self.evidence.compare(
                step,
                name,
                quantity="95th - 5th percentile of the gradient",
                value=spread,
                parameter="distribution_range",
                threshold=self.distribution_range,
                fires_when="<",
                sentence=lambda: (
                    f"{self.rule_name}: the 95th - 5th percentile of {name} is "
                    f"{spread:.3g} (< distribution_range={self.distribution_range:g}) "
                    f"at {step_words(self.base_trial, step)}"
                ),
            ):
                fired = True
        return fired

    def _loss_not_decreasing(self, step: int, mode_step: int) -> bool:
        fired = False
        for name in self.losses.names(self.base_trial, step=step):
            try:
                value = np.asarray(self.base_trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                continue
            if value.size != 1 or value.dtype.kind not in "iuf":
                continue
            loss = float(value.reshape(-1)[0])
            if self._running.applies(name, TRAIN):  # Keras: the batches' mean since the last
                batches = self._running.batch_mean(name, TRAIN, mode_step, step)
                loss = loss if batches is None else batches
            seen = self._losses.setdefault(name, deque())
            seen.append((mode_step, loss))
            while seen[0][0] <= mode_step - 2 * self.patience:  # out of both windows for good
                seen.popleft()
            fired = self._compare_windows(step, mode_step, name, seen) or fired
        return fired

    def _compare_windows(
        self, step: int, mode_step: int, name: str, seen: deque[tuple[int, float]]
    ) -> bool:
        p = self.patience
        newer = [v for s, v in seen if mode_step - p < s <= mode_step]
        anchors = [(s, v) for s, v in seen if s <= mode_step - p]
        if not newer or not anchors:
            return False
        # The loss patience steps back alone on a smooth series; the mean of the patience
        # steps before on a noisy one, once they are all past (rules_builtin._levels).
        is_smooth, noise = smooth([anchors[-1][1], *newer], _MIN_MARGIN)
        if is_smooth:
            first = last = anchors[-1][0]
            older = [anchors[-1][1]]
        elif mode_step < 2 * p - 1:
            return False
        else:
            first, last = mode_step - 2 * p + 1, mode_step - p
            older = [v for s, v in seen if first <= s <= last]
        before, now = float(np.mean(older)), float(np.mean(newer))
        decrease = _decrease_percent(before, now)
        span = f"step {first}" if first == last else f"steps {first}..{last}"
        how = f"noise {noise:.2g}% of the level: " + ("one value" if is_smooth else "means")
        return self.evidence.compare(
            step,
            name,
            quantity=f"decrease (%) of the mean loss over training steps "
            f"{mode_step - p + 1}..{mode_step} from training {span}",
            value=decrease,
            parameter="loss decrease required (%)",
            threshold=0.0,
            fires_when="<=",
            sentence=lambda: (
                f"{self.rule_name}: the mean of {name} over training steps "
                f"{mode_step - p + 1}..{mode_step} ({now:g}) is not below its value or mean "
                f"over training {span} ({before:g}) (patience={p}; {how}) at {step_words(self.base_trial, step)}"
            ),
        )


def _decrease_percent(before: float, now: float) -> float:
    """How much lower ``now`` is than ``before``, in % of ``before``; -inf for a NaN now (never
    a decrease), +inf for a NaN before (any number is) and for a loss at 0 in both windows (an
    error rate at its floor, as XGBoost's train-merror on data it fits at once: nothing to
    fall, no initialisation problem)."""
    if math.isnan(now):
        return -math.inf
    if math.isnan(before) or before == now == 0:
        return math.inf
    return percent_of(before - now, before)


_SPREAD_DTYPES = [np.dtype(t) for t in "bBhHiIlLqQfd"]
# A step's value alone: any integers or floats (np.percentile of one row is its percentile).
_NUMBERS = [np.dtype(t) for t in "bBhHiIlLqQefdg"]


def _row_variances(rows: np.ndarray) -> np.ndarray:
    """``reduction_value(step, "variance")`` of each row (one step's flattened value)."""
    result: np.ndarray = np.var(rows, axis=1)
    return result


def _row_spreads(rows: np.ndarray) -> list[float | None]:
    """95th - 5th percentile of each row (one step's flattened value), as
    ``_gradient_spread`` computes it; None for fewer than two values."""
    if rows.shape[1] < 2:
        return [None] * len(rows)
    low, high = np.percentile(rows, [5, 95], axis=1)
    return [float(h - lo) for lo, h in zip(low, high, strict=True)]
