"""The built-in rules' own helpers, public: what a copy of a built-in rule imports besides the
rule kit (``evaluator.rules.kit``: parameters, tensor selection, windows, modes).

``rule-evaluator rules NAME --source`` prints a built-in rule as a file you can run as your own
rule (``--source_s3_uri my_rule.py``): its imports of the built-ins' private helper modules
point here instead, and its ``@register`` (which makes a class a built-in) becomes
``@records_comparisons``, so the copy judges a trial exactly as the built-in does.

What is here, by the private module it comes from (each name documented there):

* ``_activations``: ``ActivationFinder`` and ``Layer`` (the activation inputs and outputs of a
  trial's layers, by framework idiom), ``FUNCTIONS``, ``function_in_name``, ``layers_of``;
* ``_cadence``: ``Cadence``, ``noise``, ``values_needed``, ``RESOLUTION_PERCENT`` (the noise of a
  logged series, and how many values a window needs to tell a trend from it);
* ``_labels``: ``class_ids``, ``require_class_labels``, ``labelled_names``,
  ``labelled_values``, ``confusion_matrix``, ``natural_key`` (classification rules);
* ``_levels``: ``LossView``, ``smooth``, ``noise``, ``single_decides``, ``fell_beyond_noise``,
  ``rose_beyond_noise``, ``noisy_levels`` (loss levels and noise; which comparison decides on
  a noisy loss);
* ``_loss_comparison``: ``Comparison``, ``judge_comparison`` and ``record_clear_fall``
  (LossNotDecreasing's record of one comparison);
* ``_phase_means``: ``PhaseMeans``, ``gap_ratio``, ``lowest_of`` (Overfit's phase means);
* ``_preactivation``: ``pre_activation`` and ``kernel_names`` (an activation's input computed
  from a layer's saved input, kernel and bias);
* ``_running_means``: ``RunningMeans`` (Keras' running-mean losses read as their batches'
  means);
* ``_progress``: ``LossProgress``, ``IGNORE_CONVERGED``, ``NOISE_AWARE`` and ``too_few_values``
  (whether a loss still improves);
* ``_validation_rise``: ``ValidationRise`` and ``risen_diagnosis`` (a validation loss risen
  beyond its noise);
* ``_warmup``: ``WarmUp`` and ``LEARNING_RATE`` (a learning rate still warming up);
* ``_spikes``: ``Definition``, ``DEFINITIONS``, ``SpikeSeries``, ``Check``,
  ``definition_from``, ``spike_parameters``, ``NOISE_VALUES`` (the spike detector of
  LossSpike and GradientNormSpike, with the frameworks' definitions);
* ``_spike_verdict``: ``judge``, ``judge_value``, ``aftermath``, ``diagnose_spike``,
  ``TRANSIENT`` (what a spike rule records and how it diagnoses a firing);
* ``_xgboost_report_html``: ``ReportData``, ``render_report``, ``METRIC_NAME`` (the XGBoost
  report page).

The names are looked up in those modules when first used (importing this module costs
nothing), so whatever a helper module exports (its ``__all__``) is public here.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

__all__ = ["HELPER_MODULES", "records_comparisons"]

HELPER_MODULES = (
    "_activations",
    "_cadence",
    "_labels",
    "_levels",
    "_loss_comparison",
    "_phase_means",
    "_preactivation",
    "_progress",
    "_running_means",
    "_validation_rise",
    "_warmup",
    "_spike_verdict",
    "_spikes",
    "_xgboost_report_html",
)

T = TypeVar("T", bound=type)


def records_comparisons(cls: T) -> T:
    """Class decorator: the rule counts only the comparisons it records as checks, and the
    report charts those, as for a built-in (``Rule.RECORDS_COMPARISONS``); without it a rule's
    reads count as its checks."""
    cls.RECORDS_COMPARISONS = True  # type: ignore[attr-defined]
    return cls


def __getattr__(name: str) -> Any:
    for helper in HELPER_MODULES:
        module = importlib.import_module(f"rules_builtin.{helper}")
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    names = set(__all__)
    for helper in HELPER_MODULES:
        names.update(getattr(importlib.import_module(f"rules_builtin.{helper}"), "__all__", ()))
    return sorted(names)
