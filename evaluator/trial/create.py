"""``create_trial``: open a trial from a local folder or an S3 prefix."""

from __future__ import annotations

import os
from typing import Any

from evaluator.engine.options import TrialOptions, validated_options
from evaluator.engine.runner import get_loop
from evaluator.errors import StorageError
from evaluator.sources import (
    check_kind,
    detect_kind,
    load_built_ins,
    make_source,
    open_location,
)
from evaluator.storage import open_storage
from evaluator.storage.base import Storage
from evaluator.storage.schemes import is_remote
from evaluator.trial.trial import Trial

__all__ = ["create_trial", "describe_location"]

_OPTION_NAMES = frozenset(TrialOptions.model_fields)
load_built_ins()  # imported with create_trial, as its own modules are, not on its first call


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
    """Open the smdebug output, TensorBoard log or other registered format's trial at
    ``path`` (a folder, ``file://`` URL or ``s3://bucket/prefix``, or a location a format opens
    itself: an MLflow run's ``runs:/<run_id>``, docs/mlflow.md): ``trial_format`` names the
    format, ``auto`` detects it (``evaluator.sources``; docs/tensorboard.md says how a
    TensorBoard log is mapped, docs/formats.md how a format is added).

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
    check_kind(options.trial_format)
    path = path.strip()
    if name is None:
        name = os.path.basename(path.rstrip("/")) or path
    located = open_location(path, options) if storage is None else None
    if located is not None:  # no storage under it: the format reads it with its own client
        return Trial(
            name, path, None, options=options, range_steps=range_steps, cache=cache, source=located
        )
    backend = (
        storage if storage is not None else open_storage(path, **_storage_options(path, options))
    )
    try:
        source = make_source(get_loop().run(detect_kind(backend, options)), backend, options)
    except BaseException:
        get_loop().run(backend.aclose(), timeout=5)
        raise
    return Trial(
        name, path, backend, options=options, range_steps=range_steps, cache=cache, source=source
    )


def describe_location(path: str, options: TrialOptions) -> dict[str, str]:
    """What ``create_trial`` would find at ``path``, without waiting: ``"trial_kind"`` (the
    format's name) and what the source says of itself (``Source.describe``): where it
    applies, ``"trial_mapping"`` (for a TensorBoard log: run, folders and modes, step rule)
    and ``"end_marker"`` (the format writes none). Empty when the location cannot be listed
    (opening the trial then says why), except for an endpoint that never answered: its
    ``StorageError`` is raised (opening the trial would wait as long again to say so)."""
    loop = get_loop()
    try:
        source = open_location(path.strip(), options)
        if source is None:
            backend = open_storage(path.strip(), **_storage_options(path.strip(), options))
            try:
                source = make_source(loop.run(detect_kind(backend, options)), backend, options)
            except BaseException:
                loop.run(backend.aclose(), timeout=5)
                raise
    except StorageError as e:
        if e.unreachable:
            raise
        return {}
    except Exception:
        return {}
    try:
        said = loop.run(source.preview())
    except StorageError as e:
        if e.unreachable:
            raise
        return {}
    except Exception:
        return {}
    finally:
        loop.run(source.aclose(), timeout=5)
    out = {"trial_kind": source.kind}
    if said.get("mapping"):
        out["trial_mapping"] = str(said["mapping"])
    if said.get("end_marker"):
        out["end_marker"] = str(said["end_marker"])
    if said.get("ends_when"):
        out["ends_when"] = str(said["ends_when"])
    return out


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
