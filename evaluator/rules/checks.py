"""One comparison a rule made (``Check``) and what a rule looks for (``SelectionHint``): the
records ``evaluator.rules.evidence`` keeps, and the sentence of a firing whose rule gave none.
``evaluator.rules.evidence`` re-exports both (rules import them from there)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.modes import WriterStep
from evaluator.rules.diagnosis import Diagnosis
from evaluator.rules.series import json_number

__all__ = ["Check", "SelectionHint", "default_sentence"]


@dataclass(frozen=True)
class Check:
    """One comparison a rule made: ``value fires_when threshold`` means the condition is met."""

    step: int  # global step
    tensors: tuple[str, ...]
    quantity: str  # what was measured, e.g. "dead units (%)"
    value: float
    parameter: str  # the rule parameter holding the threshold
    threshold: float
    fires_when: str  # ">", ">=", "<" or "<="
    mode: str | None = None  # TRAIN, EVAL, PREDICT, GLOBAL
    mode_step: int | None = None
    worker: str | None = None
    sentence: str | None = None
    diagnosis: Diagnosis | None = None  # the rule's reading of a firing (loss progress)

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "step": self.step,
            "mode": self.mode,
            "mode_step": self.mode_step,
            "worker": self.worker,
            "tensors": list(self.tensors),
            "quantity": self.quantity,
            "value": json_number(self.value),
            "comparison": self.fires_when,
            "parameter": self.parameter,
            "threshold": json_number(self.threshold),
            "sentence": self.sentence,
        }
        if self.diagnosis is not None:
            found["diagnosis"] = self.diagnosis.kind
            found["explanation"] = self.diagnosis.words
            found["diagnosis_figures"] = {
                k: json_number(v) if isinstance(v, float) else v
                for k, v in self.diagnosis.figures.items()
            }
            found["note"] = self.diagnosis.note
        return found


@dataclass(frozen=True)
class SelectionHint:
    """What a rule looks for, to explain a rule that found nothing to check."""

    description: str  # e.g. "tensor_regex '.*relu_output'" or "the gradients collection"
    patterns: tuple[str, ...] = ()  # regexes or collection names, to find close tensor names
    parameter: str | None = None  # the parameter to set, e.g. "tensor_regex"
    advice: str | None = None  # what else to do, e.g. "save the gradients collection"


def default_sentence(rule: str, check: Check, *, at: WriterStep | None = None) -> str:
    """The sentence of a firing whose rule gave none: what, of which tensors, where (``at``:
    the step the writer logged, when it is not the global step), against which parameter."""
    if at is not None and at.mode is not None:
        where = str(at)
    elif check.mode not in (None, "GLOBAL") and check.mode_step is not None:
        where = f"{check.mode} step {check.mode_step} (global step {check.step})"
    else:
        where = f"step {check.step}"
    return (
        f"{rule}: {check.quantity} of {_names(check.tensors)} is {check.value:g} at "
        f"{where}, {check.fires_when} {check.parameter}={check.threshold:g}"
    )


def _names(names: Sequence[str]) -> str:
    """At most five names, and how many more."""
    shown = ", ".join(names[:5])
    return shown if len(names) <= 5 else f"{shown} and {len(names) - 5} more"
