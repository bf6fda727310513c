"""NonFiniteValues: a NaN or infinite loss, gradient norm, learning rate or metric, or a NaN
loss hidden as 0.0."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.diagnosis import DIVERGING, Diagnosis
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_bool, parse_list
from evaluator.rules.kit.selection import TensorSelection, scalar
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import logged_step, step_words
from rules_builtin.registry import register

__all__ = ["NonFiniteValues"]

DEFAULT_COLLECTIONS = ("losses", "gradients", "metrics")
# Learning rates by name (Hugging Face's learning_rate, Lightning's lr-Adam, Keras'
# epoch_learning_rate): no collection holds them.
LEARNING_RATE = r"(?i)(learning[_-]?rate|(^|[/_.-])lr([/_.-]|$))"
ALLOWED = "non-finite values allowed"
MASKED = "losses of 0.0 beside a non-finite gradient norm or loss"
GRAD_NORM = re.compile(r"(?i)grad(ient)?[_ -]?(\d[\d.]*_)?norm")


@register
class NonFiniteValues(Rule):
    """Fires at the first step where a selected tensor holds a NaN or an infinity, or where a
    loss of exactly 0.0 stands beside a non-finite gradient norm or loss of the same mode step
    (the masked NaN below).

    Tensors: the ``losses``, ``gradients`` and ``metrics`` collections and every tensor named
    like a learning rate (``learning_rate``, ``lr``, ``lr-Adam``), unless ``collection_names`` /
    ``tensor_regex`` select others; every mode. Scalars and whole tensors alike (a tensor saved
    as reductions or a TensorBoard histogram is judged by its saved reductions); on a Hugging
    Face log: ``train/loss``, ``eval/loss``, ``train/grad_norm``, ``train/learning_rate``,
    ``eval/<metric>``.

    Masked NaN: Hugging Face's ``Trainer`` (``logging_nan_inf_filter``, on by default) leaves
    a NaN or inf loss out of the logged mean, so a window of steps that were all NaN logs
    ``loss = 0.0``, while ``grad_norm`` logs the NaN. With ``masked_nan`` true, a loss of exactly
    0.0 at a step where a gradient norm (a tensor named like ``grad_norm``, whether selected or
    not) or another loss of that mode step is NaN or infinite fires too, named as a masked NaN.

    Evidence: per tensor and step, ``non-finite values`` (the count of NaN and infinite
    elements) against ``non-finite values allowed`` = 0 (fires when ``>``), and for each loss
    of 0.0, ``losses of 0.0 beside a non-finite gradient norm or loss`` against 0. Diagnosis
    ``diverging``, with the first non-finite step. Runs in fp16 whose loss scaler skips a few
    overflowing steps log an infinite ``grad_norm`` for those steps: that fires too (it is
    non-finite); select ``collection_names=losses`` to judge the loss only.
    """

    PARAMETERS = (
        Param(
            "collection_names",
            None,
            "list",
            "Collections to check (default: losses, gradients, metrics and learning rates).",
        ),
        Param("tensor_regex", None, "list", "Regular expressions of tensors to check."),
        Param("masked_nan", "True", "bool", "Also fire on a 0.0 loss beside a NaN grad norm."),
    )

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | None = None,
        tensor_regex: str | None = None,
        masked_nan: str | bool = "True",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        given = bool(parse_list(collection_names) or parse_list(tensor_regex))
        self.selection = TensorSelection(
            name,
            collection_names if given else ",".join(DEFAULT_COLLECTIONS),
            tensor_regex if given else LEARNING_RATE,
        )
        self.losses = TensorSelection(name, "losses", None, all_when_empty=False)
        self.masked_nan = parse_bool(name, "masked_nan", masked_nan)

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        trial = self.base_trial
        fired = False
        for name in self.selection.names(trial, step=step):
            found = self._count(name, step)
            if found is None:
                continue
            count, size = found
            fired = self._compare(step, name, count, size) or fired
        if self.masked_nan:
            fired = self._masked(step) or fired
        return fired

    def _count(self, name: str, step: int) -> tuple[int, int] | None:
        """(non-finite elements, elements) of ``name`` at ``step``, from its value or its
        saved reductions; None when neither is there or it cannot hold a NaN."""
        tensor = self.base_trial.tensor(name)
        try:
            value = np.asarray(tensor.value(step))
        except TensorUnavailableForStep as e:
            if not e.has_reductions:
                return None
            saved = tensor.reduction_values(step)
            value = np.array([np.asarray(v).reshape(-1)[0] for v in saved.values()])
        if value.dtype.kind not in "fc" or value.size == 0:
            return None
        return int(np.count_nonzero(~np.isfinite(value))), int(value.size)

    def _compare(self, step: int, name: str, count: int, size: int) -> bool:
        what = "value" if size == 1 else f"of {size} elements"
        return bool(
            self.evidence.compare(
                step,
                name,
                quantity="non-finite values",
                value=count,
                parameter=ALLOWED,
                threshold=0,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {name} holds {count} NaN or infinite {what} at "
                    f"{self._where(step)}"
                ),
                diagnose=lambda: self._diagnosis(step, name, f"{name} became NaN or infinite"),
            )
        )

    def _masked(self, step: int) -> bool:
        """A loss of exactly 0.0 at ``step`` beside a non-finite gradient norm or loss."""
        trial = self.base_trial
        names = trial.tensor_names(step=step)
        losses = [n for n in self.losses.names(trial, step=step)]
        zeros = [n for n in losses if _scalar(trial, n, step) == 0.0]
        if not zeros:
            return False
        partners = [n for n in names if GRAD_NORM.search(n) or n in losses]
        bad = [n for n in partners if _non_finite(trial, n, step)]
        bad += self._other_mode(step, losses)
        fired = False
        for name in zeros:
            culprits = [n for n in bad if n != name]
            fired = self._compare_masked(step, name, culprits) or fired
        return fired

    def _other_mode(self, step: int, losses: list[str]) -> list[str]:
        """Losses of the other mode logged at the same mode step (a TensorBoard log gives a
        TRAIN and an EVAL value of one step two global steps) that are non-finite."""
        trial = self.base_trial
        mode, mode_step = trial.mode_modestep(step)
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL) or mode_step is None:
            return []
        other = ModeKeys.EVAL if mode == ModeKeys.TRAIN else ModeKeys.TRAIN
        g = trial.global_step(other, mode_step)
        if g is None or g not in trial.steps():
            return []
        return [f"{n} ({other.name})" for n in self.losses.names(trial, step=g)
                if _non_finite(trial, n, g)]  # fmt: skip

    def _compare_masked(self, step: int, name: str, culprits: list[str]) -> bool:
        shown = ", ".join(culprits)
        return bool(
            self.evidence.compare(
                step,
                name,
                quantity=MASKED,
                value=len(culprits),
                parameter=ALLOWED,
                threshold=0,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {name} is 0.0 at {self._where(step)} while {shown} is "
                    "NaN or infinite: a NaN loss masked as 0.0 (Hugging Face's "
                    "logging_nan_inf_filter)"
                ),
                diagnose=lambda: self._diagnosis(
                    step, name, f"{name} logged 0.0 beside a non-finite {shown} (a masked NaN)"
                ),
            )
        )

    def _where(self, step: int) -> str:
        mode, mode_step = self.base_trial.mode_modestep(step)
        return step_words(self.base_trial, step, mode, mode_step)

    def _diagnosis(self, step: int, name: str, what: str) -> Diagnosis:
        return Diagnosis(
            DIVERGING,
            f"{what} (first at {self._where(step)}): the run diverged; lower the learning "
            "rate, clip the gradients, or check the data and the mixed-precision loss scaling",
            {"first_non_finite_step": logged_step(self.base_trial, step), "tensor": name},
        )


def _scalar(trial: Any, name: str, step: int) -> float | None:
    try:
        return scalar(trial.tensor(name).value(step))
    except TensorUnavailableForStep:
        return None


def _non_finite(trial: Any, name: str, step: int) -> bool:
    value = _scalar(trial, name, step)
    return value is not None and not np.isfinite(value)
