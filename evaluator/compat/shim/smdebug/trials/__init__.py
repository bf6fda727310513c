"""smdebug.trials: ``create_trial`` and the Trial classes."""

from __future__ import annotations

from typing import Any

from evaluator.trial import Trial, create_trial

__all__ = ["LocalTrial", "S3Trial", "Trial", "create_trial"]


def LocalTrial(name: str, dirname: str, **kwargs: Any) -> Trial:  # noqa: N802 - smdebug's name
    """smdebug's ``LocalTrial(name, dirname, ...)`` constructor, for code that calls it directly."""
    return create_trial(dirname, name=name, **kwargs)


def S3Trial(name: str, bucket_name: str, prefix_name: str, **kwargs: Any) -> Trial:  # noqa: N802
    """smdebug's ``S3Trial(name, bucket_name, prefix_name, ...)`` constructor."""
    return create_trial(f"s3://{bucket_name}/{prefix_name}", name=name, **kwargs)
