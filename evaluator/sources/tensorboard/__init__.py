"""TensorBoard log folders as an input format: ``events.out.tfevents.*`` files, their runs and
phase folders, read as smdebug-style steps, modes and tensors (docs/tensorboard.md).

``source`` tails the files and maps the run (``TensorBoardSource``), ``layout`` finds runs and
collections, ``steps`` applies records to per-tag ``columns``, ``values`` answers from them
(``HeldTensors``).
"""

from __future__ import annotations

from evaluator.engine.options import TrialOptions
from evaluator.formats.tensorboard.summary import is_event_file
from evaluator.sources.registry import SourceFormat
from evaluator.sources.tensorboard.source import TensorBoardSource
from evaluator.storage.base import Storage

__all__ = ["FORMAT", "TensorBoardSource"]


def _make(storage: Storage, options: TrialOptions) -> TensorBoardSource:
    return TensorBoardSource(storage, options=options)


FORMAT = SourceFormat("tensorboard", is_event_file, _make)
