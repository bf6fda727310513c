"""Write trials in smdebug 1.0.34's exact on-disk format from numpy arrays.

For tests, benchmarks and rule authors who want a trial without a training job::

    import numpy as np
    from evaluator.formats import Collection, ReductionConfig
    from evaluator.modes import ModeKeys
    from evaluator.testing import TrialWriter, compute_reductions

    writer = TrialWriter("/tmp/my_trial")  # worker "worker_0"
    writer.write_collections([
        Collection("gradients", include_regex=["^gradients/"],
                   reduction_config=ReductionConfig(reductions=["mean"], norms=["l2"])),
        Collection("losses", tensor_names={"loss"}),
    ])
    for step in range(10):
        grad = np.random.randn(4, 4).astype(np.float32)
        writer.write_step(
            step,
            {"loss": np.float32(1.0 / (step + 1))},  # a numpy scalar is saved with shape (1,)
            mode=ModeKeys.TRAIN,
            reductions={"gradients/w": compute_reductions(grad, ["mean", "l2"])},
            shapes={"gradients/w": grad.shape},
        )
    writer.end_training()  # touch training_job_end.ts

``StepWriter`` (``writer.step_writer(step)``) is the lower level, mirroring smdebug's per-step
``FileWriter``: ``write_tensor`` and ``write_shape`` in any order and modes, then ``close``.
Index ``meta`` follows smdebug's rule: it comes from the first tensor written, or from the first
shape if no tensor was written. Files appear atomically (``<name>.tmp`` then a rename), the event
file before the index file, so a reader polling the trial never sees half a step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.formats.collections_file import (
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    Collection,
    CollectionsFile,
    serialize_collections_file,
)
from evaluator.formats.events import encode_tensor_event
from evaluator.formats.index_file import (
    IndexFile,
    IndexMeta,
    ShapeEntry,
    TensorEntry,
    serialize_index_file,
)
from evaluator.formats.keys import (
    END_OF_JOB_KEY,
    REDUCTIONS_PREFIX,
    collections_key,
    event_key,
    index_key,
)
from evaluator.formats.tfrecord import encode_record
from evaluator.modes import ModeKeys

__all__ = ["StepWriter", "TrialWriter", "compute_reductions"]

_NUMPY_REDUCTION: dict[str, Callable[[np.ndarray], Any]] = {
    "min": np.amin,
    "max": np.amax,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
}


class StepWriter:
    """Everything one worker saves at one global step; nothing is on disk before ``close``."""

    def __init__(self, root: str | os.PathLike[str], step: int, *, worker: str = "worker_0"):
        self.root = Path(root)
        self.step = step
        self.worker = worker
        self._records = bytearray()
        self._tensors: list[TensorEntry] = []
        self._shapes: list[ShapeEntry] = []
        self._meta: IndexMeta | None = None
        self._closed = False

    def write_tensor(
        self,
        value: object,
        name: str,
        *,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        wall_time: float | None = None,
    ) -> TensorEntry:
        """Append a tensor record (smdebug's value rules: a scalar is saved with shape (1,))."""
        self._check_open()
        mode_step = self.step if mode_step is None else mode_step
        payload = encode_tensor_event(
            name,
            value,
            step=self.step,
            mode=mode,
            mode_step=mode_step,
            wall_time=time.time() if wall_time is None else wall_time,
        )
        record = encode_record(payload)
        entry = TensorEntry(name, len(self._records), len(record))
        self._records += record
        self._tensors.append(entry)
        if self._meta is None or self._meta.event_file_name is None:
            self._meta = IndexMeta(mode, mode_step, event_key(self.step, self.worker))
        return entry

    def write_shape(
        self,
        name: str,
        shape: Sequence[int],
        *,
        original_name: str | None = None,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
    ) -> ShapeEntry:
        """Record a shape without a value. ``original_name`` defaults to ``name``."""
        self._check_open()
        if not isinstance(mode, ModeKeys):
            raise TypeError(f"mode must be a ModeKeys, got {mode!r}")
        mode_step = self.step if mode_step is None else mode_step
        entry = ShapeEntry(name, name if original_name is None else original_name, tuple(shape))
        self._shapes.append(entry)
        if self._meta is None:
            self._meta = IndexMeta(mode, mode_step, None)
        return entry

    def close(self) -> None:
        """Write the event file (if any tensor) and then the index file (if anything)."""
        if self._closed:
            return
        self._closed = True
        if self._records:
            _write_atomically(self.root / event_key(self.step, self.worker), bytes(self._records))
        if self._meta is not None:
            index = IndexFile(self._meta, tuple(self._tensors), tuple(self._shapes))
            path = self.root / index_key(self.step, self.worker)
            _write_atomically(path, serialize_index_file(index))

    def __enter__(self) -> StepWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"step {self.step} of worker {self.worker} is already closed")


class TrialWriter:
    """One worker's view of a trial folder. Use one per worker for multi-worker trials."""

    def __init__(self, root: str | os.PathLike[str], *, worker: str = "worker_0"):
        self.root = Path(root)
        self.worker = worker

    def write_collections(
        self, collections: Iterable[Collection] | Mapping[str, Collection], *, num_workers: int = 1
    ) -> None:
        """Write this worker's ``collections/000000000/<worker>_collections.json``."""
        items = collections.values() if isinstance(collections, Mapping) else collections
        document = CollectionsFile({c.name: c for c in items}, num_workers)
        path = self.root / collections_key(self.worker)
        _write_atomically(path, serialize_collections_file(document))

    def step_writer(self, step: int) -> StepWriter:
        """A ``StepWriter`` for ``step``; close it (or use ``with``) to write the files."""
        return StepWriter(self.root, step, worker=self.worker)

    def write_step(
        self,
        step: int,
        tensors: Mapping[str, object],
        *,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        shapes: Mapping[str, Sequence[int]] | None = None,
        reductions: Mapping[str, Mapping[str, object]] | None = None,
        wall_time: float | None = None,
    ) -> None:
        """Write one step: raw ``tensors``, then ``reductions``, then shape-only ``shapes``.

        ``reductions`` maps a tensor name to ``{"mean": v, "abs_max": v, "l2": v, ...}`` (see
        ``compute_reductions``); each is saved as ``smdebug/reductions/<key>/<name>``.
        """
        with self.step_writer(step) as w:
            kwargs: dict[str, Any] = {"mode": mode, "mode_step": mode_step}
            for name, value in tensors.items():
                w.write_tensor(value, name, wall_time=wall_time, **kwargs)
            for name, values in (reductions or {}).items():
                for key, value in values.items():
                    _check_reduction_key(key)
                    tag = f"{REDUCTIONS_PREFIX}{key}/{name}"
                    w.write_tensor(value, tag, wall_time=wall_time, **kwargs)
            for name, shape in (shapes or {}).items():
                w.write_shape(name, shape, **kwargs)

    def end_training(self) -> None:
        """Touch ``training_job_end.ts``, which tells readers no more data will come."""
        _write_atomically(self.root / END_OF_JOB_KEY, b"")


def compute_reductions(value: object, names: Iterable[str]) -> dict[str, np.generic]:
    """Reductions of ``value`` as a framework hook would save them, keyed by ``names``.

    A name is a reduction (min, max, mean, std, variance, sum, prod) or a norm (l1, l2),
    optionally prefixed ``abs_``. Norms are vector norms of the flattened values (what the
    hooks compute); std and variance use ddof=0 (PyTorch hooks save the unbiased ones).
    """
    array = np.asarray(value)
    out: dict[str, np.generic] = {}
    for key in names:
        is_abs, base = _check_reduction_key(key)
        data = np.absolute(array) if is_abs else array
        if base in ALLOWED_NORMS:
            out[key] = np.linalg.norm(data.ravel(), ord=int(base[1]))
        else:
            out[key] = _NUMPY_REDUCTION[base](data)
    return out


def _check_reduction_key(key: str) -> tuple[bool, str]:
    is_abs = key.startswith("abs_")
    base = key[4:] if is_abs else key
    if base not in ALLOWED_REDUCTIONS and base not in ALLOWED_NORMS:
        allowed = ", ".join(ALLOWED_REDUCTIONS + ALLOWED_NORMS)
        raise ValueError(f"unknown reduction {key!r}; expected [abs_]one of {allowed}")
    return is_abs, base


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``<path>.tmp`` and rename it over ``path``, as smdebug's writers do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
