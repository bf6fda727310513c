"""The smdebug-compatible Trial / Tensor API over the trial cache.

The names load on first use: the configuration imports ``evaluator.engine.options``, and a bad
configuration must fail without loading numpy and the storage clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluator.engine.options import TrialOptions
    from evaluator.trial.create import create_trial
    from evaluator.trial.tensor import Tensor
    from evaluator.trial.trial import Trial

__all__ = ["Tensor", "Trial", "TrialOptions", "create_trial"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import evaluator.engine.options as options_module
    import evaluator.trial.create as create_module
    import evaluator.trial.tensor as tensor_module
    import evaluator.trial.trial as trial_module

    names = {
        "Tensor": tensor_module.Tensor,
        "Trial": trial_module.Trial,
        "TrialOptions": options_module.TrialOptions,
        "create_trial": create_module.create_trial,
    }
    globals().update(names)
    return names[name]
