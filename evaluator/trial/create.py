"""``create_trial``: open a trial from a local folder or an S3 prefix."""

from __future__ import annotations

import os
from typing import Any

from evaluator.config import TrialOptions
from evaluator.storage import open_storage
from evaluator.storage.base import Storage
from evaluator.trial.trial import Trial

__all__ = ["create_trial"]

_OPTION_NAMES = frozenset(TrialOptions.model_fields)


def create_trial(
    path: str,
    name: str | None = None,
    profiler: bool = False,
    output_dir: str = "/opt/ml/processing/outputs/",
    *,
    range_steps: tuple[int | None, int | None] | None = None,
    check: Any = False,
    index_mode: bool = True,
    cache: bool = False,
    parallel: bool = True,
    storage: Storage | None = None,
    **options: Any,
) -> Trial:
    """Open the smdebug output at ``path`` (a folder, ``file://`` URL or ``s3://bucket/prefix``).

    Arguments follow smdebug's ``create_trial``; ``check``, ``index_mode`` and ``parallel`` are
    accepted for compatibility and have no effect. Keyword ``options`` are ``TrialOptions``
    fields (``incomplete_step_window``, ``collection_wait_timeout``, ``value_cache_mb`` …).
    ``storage`` reads the trial through a given backend instead of one chosen from ``path``.
    """
    if profiler:
        raise NotImplementedError("profiler trials are not supported by this evaluator")
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise TypeError(f"create_trial() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    _check_range(range_steps)
    path = path.strip()
    if name is None:
        name = os.path.basename(path.rstrip("/")) or path
    backend = storage if storage is not None else open_storage(path)
    return Trial(name, path, backend, options=TrialOptions.from_env(**options),
                 range_steps=range_steps, cache=cache)


def _check_range(range_steps: tuple[int | None, int | None] | None) -> None:
    # smdebug asserts these; a clear ValueError is kinder than an AssertionError.
    if range_steps is None:
        return
    if len(range_steps) != 2:
        raise ValueError("range_steps must be a (begin, end) pair")
    begin, end = range_steps
    for value in (begin, end):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(f"range_steps values must be None or integers >= 0, got {range_steps!r}")
    if begin is not None and end is not None and end <= begin:
        raise ValueError(f"range_steps end must be greater than begin, got {range_steps!r}")
