"""LossSpike: a training loss far above its recent level, for some logged values in a row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from evaluator.errors import TensorUnavailableForStep
from evaluator.formats.tensorboard.summary import phase_of_tag
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.modes import as_training, is_epoch_end_log, step_in_mode
from evaluator.rules.kit.params import Param, parse_mode
from evaluator.rules.kit.selection import TensorSelection, scalar
from evaluator.rules.rule import Rule
from rules_builtin._spike_verdict import judge_value
from rules_builtin._spikes import Definition, SpikeSeries, definition_from, spike_parameters
from rules_builtin.registry import register

__all__ = ["LossSpike"]

TRAIN = ModeKeys.TRAIN
# Ours: the median of the last 5 values; a spike is >= 1.5 x it and > 2.5 robust spreads of
# the run's own log-changes above it, 3 logged values in a row (bench/STABILITY.md).
DEFAULT = Definition(5, "median", factor=1.5, sigmas=2.5, patience=3, warmup=5)


@register
class LossSpike(Rule):
    """Fires at a step where a loss has been at or above its *spike bound* for ``patience``
    logged values in a row; the bound comes from the values logged before (the reference: the
    ``mean``, ``median`` or ``max`` of the last ``window``).

    Tensors: the scalar tensors of the ``losses`` collection (``collection_names`` /
    ``tensor_regex`` instead when given), in ``mode`` (TRAIN by default; a trial without modes
    counts as training). On a Hugging Face log that is ``train/loss``; Keras' epoch-end logs
    at EVAL steps and, in a trial without modes, losses named for the other phase
    (XGBoost's ``validation-logloss`` when following TRAIN) are skipped. Each tensor is one series; values count in logged values, not
    steps (a log every 500 steps and one every step are judged alike).

    Definitions (``definition``; a parameter given changes that one setting):

    * ``default`` (ours): reference the median of the last 5 values; a spike is at least
      ``factor`` 1.5 times it AND more than ``sigmas`` 2.5 spreads above it, where the spread
      is the run's own noise, measured robustly on the changes of log(loss) over the last 50
      values (``rules_builtin._spikes``), so a steady fall is not noise and a noisy run gets a
      wider bound; 3 values in a row (``patience``), after 5 values (``warmup``); a spike does
      not join the window. Tuned on 38 healthy Hugging Face runs (quiet on all) and injected
      faults (bench/STABILITY.md, docs/rules.md "Stability rules").
    * ``megatron``: Megatron-LM's rerun state machine flags a "spiky loss" when
      ``|loss| >= 10 x`` the largest ``|loss|`` it sampled over the first 100 values (it
      samples once, then keeps that maximum; NaN and inf are left to its NaN check;
      ``is_unexpectedly_large`` in ``megatron/core/rerun_state_machine.py``, called with
      threshold 10 for the loss).
    * ``llm_foundry``: llm-foundry's ``KillLossSpike`` callback counts a loss ``>= 2 x`` the
      mean of the last 100 losses (checks start with a full window; every loss joins it) and
      reports a spike when more than 4 come in a row (``patience`` 5; defaults of
      ``llmfoundry/callbacks/kill_loss_spike_callback.py``: ``window_size`` 100,
      ``outlier_multiplier`` 2, ``patience`` 4).
    * ``olmo``: OLMo-core's ``StabilityMonitorCallback`` calls a value a spike when it is
      ``> mean + 6 x`` the (population) standard deviation of the last 128 values (a full
      window; none when that deviation is below 1e-10; every value joins the window) and
      reports the spike rate (``window_size`` 128, ``threshold_std`` 6.0 in
      ``src/olmo_core/train/callbacks/stability_monitor.py``).
    * ``lightning``: Lightning Fabric's ``SpikeDetection`` (``mode="min"``, ``window=10``,
      ``warmup=1``, ``rtol=2.0``) calls a loss a spike when it is above the previous one and
      ``|loss - running mean| >= 2 x`` the running mean of the last 10 non-spike values, from
      the second value on (for a positive loss: at least 3 x that mean); a NaN or inf loss is
      a spike too (``finite_only``; ``src/lightning/fabric/utilities/spike.py``).

    In every definition here a NaN or infinite value is above the bound (it never joins the
    window).

    Evidence: the loss and its bound are charted per step; each value checked records
    ``logged values in a row at or above the spike bound`` against ``patience`` (fires when
    ``>=``, so a spike that lasts fires at each further value). A firing's sentence gives
    the value, the bound, the reference and the definition; its diagnosis says how many
    logged values the spike lasted and whether the loss came back below the bound (kind
    ``transient``, with the step) or not (``diverging``), read from the values the trial
    holds after the firing (all of them in a finished log; in a live run, those logged so
    far), and the spike rate so far (values above the bound / values checked, and episodes).
    """

    PARAMETERS = (
        Param("collection_names", None, "list", "Collections of the losses (default: losses)."),
        Param("tensor_regex", None, "list", "Regular expressions of the losses to check."),
        Param("mode", "TRAIN", "mode", "The mode whose values are checked (GLOBAL: training)."),
        *spike_parameters("losses", DEFAULT),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        mode: str = "TRAIN",
        definition: str = "default",
        window: str | None = None,
        reference: str | None = None,
        factor: str | None = None,
        sigmas: str | None = None,
        patience: str | None = None,
        warmup: str | None = None,
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(
            name, collection_names, tensor_regex, default_collections=["losses"]
        )
        self.mode = as_training(parse_mode(name, "mode", mode) or TRAIN)
        self.definition = definition_from(
            name,
            DEFAULT,
            definition,
            window=window,
            reference=reference,
            factor=factor,
            sigmas=sigmas,
            patience=patience,
            warmup=warmup,
        )
        self.spike_series: dict[str, SpikeSeries] = {}
        self._not_scalar: set[str] = set()

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        found = step_in_mode(self.base_trial, step, self.mode)
        if found is None:
            return False
        raw_mode, mode_step = found
        fired = False
        for name in self.selection.names(self.base_trial, step=step):
            if name in self._not_scalar:
                continue
            if raw_mode == ModeKeys.EVAL and is_epoch_end_log(self.base_trial, name, step):
                continue  # Keras: the training epoch's mean, logged at an EVAL step
            if _other_phase(name, self.mode):
                continue  # XGBoost's validation-logloss, Keras' val_loss: another phase
            value = self._value(name, step)
            if value is None:
                continue
            later = _later(self.base_trial, name, raw_mode, mode_step)
            at = {"mode": self.mode, "mode_step": mode_step, "later": later}
            fired = judge_value(self, step, name, value, what="loss", **at) or fired
        return fired

    def _value(self, name: str, step: int) -> float | None:
        try:
            value = scalar(self.base_trial.tensor(name).value(step))
        except TensorUnavailableForStep:
            return None
        if value is None:
            self._not_scalar.add(name)
            self.logger.info("%s: %s is not a scalar; not checked", self.rule_name, name)
        return value


def _other_phase(name: str, mode: ModeKeys) -> bool:
    """Whether the name says it is another phase's (``validation-logloss`` followed as
    TRAIN): a trial without modes logs both phases as GLOBAL."""
    found = phase_of_tag(name)
    return found is not None and found[1] != mode


def _later(trial: Any, name: str, mode: ModeKeys, after: int) -> Any:
    """The (mode step, value) of ``name`` logged after mode step ``after``, lazily."""

    def values() -> Iterator[tuple[int, float]]:
        tensor = trial.tensor(name)
        for s in tensor.steps(mode=mode):
            if s <= after:
                continue
            try:
                value = scalar(tensor.value(s, mode=mode))
            except TensorUnavailableForStep:
                continue
            if value is not None:
                yield s, value

    return values
