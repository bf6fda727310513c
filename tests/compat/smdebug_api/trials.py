"""Writing the trials these tests read: whole steps through ``TrialWriter``, or bare index files
(no event file) for the step-bookkeeping scenarios."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.formats.keys import END_OF_JOB_KEY, index_key
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter


def write_steps(
    root: Path | str,
    steps: Iterable[int],
    *,
    prefix: str = "foo",
    count: int = 3,
    worker: str = "worker_0",
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step_of: dict[int, int] | None = None,
    collections: bool = True,
) -> None:
    """``count`` tensors ``<prefix>_<i>`` filled with the step number at each of ``steps``; the
    collections ``default`` and ``gradients`` list them (unless ``collections`` is false)."""
    writer = TrialWriter(root, worker=worker)
    names = [f"{prefix}_{i}" for i in range(count)]
    if collections:
        writer.write_collections(
            [Collection("default", tensor_names=set(names)), Collection("gradients")]
        )
    for step in steps:
        ms = None if mode_step_of is None else mode_step_of[step]
        values = {n: np.full((3, 3), step, np.float32) for n in names}
        writer.write_step(step, values, mode=mode, mode_step=ms)


def declare_workers(root: Path | str, count: int) -> None:
    """A collections file per worker ``worker_0`` … saying the job has ``count`` workers."""
    for w in range(count):
        TrialWriter(root, worker=f"worker_{w}").write_collections([], num_workers=count)


def bare_index(
    root: Path | str, step: int, worker: str, mode: str = "TRAIN", mode_step: int = 0
) -> None:
    """An index file for ``step`` naming one tensor in an event file that is never written:
    enough for the step bookkeeping (steps, workers, modes), never for a value."""
    document = {
        "meta": {"mode": mode, "mode_step": mode_step, "event_file_name": ""},
        "tensor_payload": [{"tensorname": "gradients/dummy:0", "start_idx": 0, "length": 1}],
    }
    path = Path(root) / index_key(step, worker)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))


def end_job(root: Path | str) -> None:
    """The end marker the hook writes when training ends."""
    (Path(root) / END_OF_JOB_KEY).touch()
