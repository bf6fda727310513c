"""``create_trial``: open a trial from a local folder or an S3 prefix."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator
from typing import Any, cast

from evaluator.formats.keys import COLLECTIONS_PREFIX, INDEX_PREFIX
from evaluator.formats.tb_summary import is_event_file
from evaluator.storage import open_storage
from evaluator.storage.base import ObjectInfo, Storage
from evaluator.storage.schemes import is_remote
from evaluator.trial.options import TrialOptions, validated_options
from evaluator.trial.runner import get_loop
from evaluator.trial.tb_source import TensorBoardSource
from evaluator.trial.trial import Trial

__all__ = ["create_trial", "describe_location"]

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
    options: TrialOptions | None = None,
    **option_kwargs: Any,
) -> Trial:
    """Open the smdebug output or TensorBoard log at ``path`` (a folder, ``file://`` URL or
    ``s3://bucket/prefix``); see docs/tensorboard.md for how a TensorBoard log is mapped.

    Arguments follow smdebug's ``create_trial``; ``check``, ``index_mode`` and ``parallel`` are
    accepted for compatibility and have no effect. ``storage`` reads the trial through a given
    backend instead of one chosen from ``path``.

    ``options`` (a ``TrialOptions``) are used as they are; without them, ``option_kwargs`` —
    ``TrialOptions`` fields such as ``incomplete_step_window`` — over the defaults. No
    environment variable is read here: ``smdebug.trials.create_trial`` and the evaluator's
    configuration read them (``evaluator.config.trial_options_from_env``).
    """
    if profiler:
        raise NotImplementedError("profiler trials are not supported by this evaluator")
    _check_option_kwargs(option_kwargs, options)
    _check_range(range_steps)
    if options is None:
        options = validated_options(option_kwargs)
    path = path.strip()
    if name is None:
        name = os.path.basename(path.rstrip("/")) or path
    backend = (
        storage if storage is not None else open_storage(path, **_storage_options(path, options))
    )
    source = None
    try:
        if _kind(backend, options) == "tensorboard":
            source = TensorBoardSource(backend, options=options)
    except BaseException:
        get_loop().run(backend.aclose(), timeout=5)
        raise
    return Trial(
        name, path, backend, options=options, range_steps=range_steps, cache=cache, source=source
    )


def describe_location(path: str, options: TrialOptions) -> dict[str, str]:
    """What ``create_trial`` would find at ``path``, without waiting: ``{"trial_kind": ...}``
    and, for a TensorBoard log, ``"trial_mapping"`` (run, folders and modes, step rule).
    Empty when the location cannot be listed (opening the trial then says why)."""
    try:
        backend = open_storage(path.strip(), **_storage_options(path.strip(), options))
    except Exception:
        return {}
    loop = get_loop()
    try:
        kind = _kind(backend, options)
        out = {"trial_kind": kind}
        if kind == "tensorboard":
            source = TensorBoardSource(backend, options=options)
            mapping = loop.run(source.describe())
            if mapping is not None:
                out["trial_mapping"] = mapping
        return out
    except Exception:
        return {}
    finally:
        loop.run(backend.aclose(), timeout=5)


def _kind(storage: Storage, options: TrialOptions) -> str:
    """``smdebug`` or ``tensorboard``: ``options.trial_format``, or, for ``auto``, what the
    location holds (smdebug's ``collections/`` or ``index/`` win; an empty one is smdebug's)."""
    if options.trial_format != "auto":
        return options.trial_format
    return str(get_loop().run(_detect(storage)))


async def _detect(storage: Storage) -> str:
    pages = cast(AsyncGenerator[ObjectInfo, None], storage.list_after(""))
    found = "smdebug"
    async with contextlib.aclosing(pages) as listing:
        async for obj in listing:
            if obj.key.startswith((COLLECTIONS_PREFIX, INDEX_PREFIX)):
                return "smdebug"
            if found == "smdebug" and is_event_file(obj.key):
                found = "tensorboard"
    return found


def _storage_options(path: str, options: TrialOptions) -> dict[str, float]:
    """A remote store client's deadlines (a local folder takes none)."""
    if not is_remote(path):
        return {}
    return {
        "connect_timeout": options.s3_connect_timeout,
        "read_timeout": options.s3_read_timeout,
        "request_deadline": options.s3_request_deadline,
        "outage_tolerance": options.s3_outage_tolerance,
    }


def _check_option_kwargs(option_kwargs: dict[str, Any], options: TrialOptions | None) -> None:
    unknown = set(option_kwargs) - _OPTION_NAMES
    if unknown:
        raise TypeError(
            f"create_trial() got unexpected keyword argument(s): {', '.join(sorted(unknown))}"
        )
    if options is not None and option_kwargs:
        raise TypeError(
            "create_trial() takes options or option keyword arguments, not both: "
            f"got options and {', '.join(sorted(option_kwargs))}"
        )


def _check_range(range_steps: tuple[int | None, int | None] | None) -> None:
    # smdebug asserts these; a clear ValueError is kinder than an AssertionError.
    if range_steps is None:
        return
    if len(range_steps) != 2:
        raise ValueError("range_steps must be a (begin, end) pair")
    begin, end = range_steps
    for value in (begin, end):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(
                f"range_steps values must be None or integers >= 0, got {range_steps!r}"
            )
    if begin is not None and end is not None and end <= begin:
        raise ValueError(f"range_steps end must be greater than begin, got {range_steps!r}")
