"""smdebug.trials: ``create_trial`` and the Trial classes.

As smdebug's own trials do, these read the trial-option environment variables
(``SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`` …, docs/configuration.md, "Trial options"); arguments win.
``evaluator.trial.create_trial`` reads none: it takes its options as given.
"""

from __future__ import annotations

from typing import Any

from evaluator.config import trial_options_from_env
from evaluator.trial import Trial, TrialOptions
from evaluator.trial import create_trial as _create_trial

__all__ = ["LocalTrial", "S3Trial", "Trial", "create_trial"]


def create_trial(
    path: str,
    name: str | None = None,
    profiler: bool = False,
    output_dir: str = "/opt/ml/processing/outputs/",
    **kwargs: Any,
) -> Trial:
    """smdebug's ``create_trial``: ``evaluator.trial.create_trial`` with the options of the
    environment, keyword arguments winning (``options=`` given: used as they are)."""
    if kwargs.get("options") is None:
        option_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in TrialOptions.model_fields}
        kwargs["options"] = trial_options_from_env(None, **option_kwargs)
    return _create_trial(path, name, profiler, output_dir, **kwargs)


def LocalTrial(name: str, dirname: str, **kwargs: Any) -> Trial:  # noqa: N802 - smdebug's name
    """smdebug's ``LocalTrial(name, dirname, ...)`` constructor, for code that calls it directly."""
    return create_trial(dirname, name=name, **kwargs)


def S3Trial(name: str, bucket_name: str, prefix_name: str, **kwargs: Any) -> Trial:  # noqa: N802
    """smdebug's ``S3Trial(name, bucket_name, prefix_name, ...)`` constructor."""
    return create_trial(f"s3://{bucket_name}/{prefix_name}", name=name, **kwargs)
