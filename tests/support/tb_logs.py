"""TensorBoard logs for tests, written by the real writers, and TensorBoard's own reading of them.

* ``torch_style``: tensorboardX's ``SummaryWriter`` (the protos torch's SummaryWriter writes:
  ``simple_value`` scalars, ``HistogramProto`` histograms);
* ``tf2_style``: TensorBoard's summary ``*_pb`` functions through its event-file writer
  (tensor summaries with plugin metadata, ``[k, 3]`` histograms), metadata on a tag's first
  value only, as ``tf.summary`` writes them;
* ``oracle``: ``EventAccumulator`` with ``size_guidance`` 0 (everything kept).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["oracle", "oracle_values", "tf2_style", "torch_style"]

Series = Mapping[str, Iterable[tuple[int, Any]]]
NONE: Series = MappingProxyType({})


def torch_style(logdir: Path | str, scalars: Series = NONE, histograms: Series = NONE) -> Path:
    """Write ``scalars`` (tag -> [(step, float)]) and ``histograms`` (tag -> [(step, array)])
    with tensorboardX, steps in order, scalars of a step before its histograms."""
    from tensorboardX import SummaryWriter

    by_step: dict[int, list[tuple[str, str, Any]]] = {}
    for tag, series in scalars.items():
        for step, value in series:
            by_step.setdefault(step, []).append(("s", tag, value))
    for tag, series in histograms.items():
        for step, value in series:
            by_step.setdefault(step, []).append(("h", tag, value))
    os.makedirs(logdir, exist_ok=True)
    writer = SummaryWriter(str(logdir))
    for step in sorted(by_step):
        for kind, tag, value in by_step[step]:
            if kind == "s":
                writer.add_scalar(tag, value, step)
            else:
                writer.add_histogram(tag, np.asarray(value), step)
    writer.close()
    return Path(logdir)


def tf2_style(
    logdir: Path | str,
    scalars: Series = NONE,
    histograms: Series = NONE,
    tensors: Series = NONE,
    *,
    buckets: int = 30,
) -> Path:
    """Write TF2-style tensor summaries with TensorBoard's own ``scalar_pb``/``histogram_pb``
    and event-file writer; a tag's plugin metadata only with its first value."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.histogram.summary_v2 import histogram_pb
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    os.makedirs(logdir, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    seen: set[str] = set()
    by_step: dict[int, list[summary_pb2.Summary.Value]] = {}

    def add(step: int, summary: summary_pb2.Summary) -> None:
        for value in summary.value:
            if value.tag in seen:
                value.ClearField("metadata")
            seen.add(value.tag)
            by_step.setdefault(step, []).append(value)

    for tag, series in scalars.items():
        for step, x in series:
            add(step, scalar_pb(tag, np.float32(x)))
    for tag, series in histograms.items():
        for step, x in series:
            add(step, histogram_pb(tag, np.asarray(x), buckets=buckets))
    for tag, series in tensors.items():
        for step, x in series:
            proto = tensor_util.make_tensor_proto(np.asarray(x))
            add(step, summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, tensor=proto)]))
    for step in sorted(by_step):
        for value in by_step[step]:
            event = event_pb2.Event(
                step=step, wall_time=1.0 + step, summary=summary_pb2.Summary(value=[value])
            )
            writer.add_event(event)
    writer.close()
    return Path(logdir)


def oracle(folder: Path | str) -> Any:
    """TensorBoard's ``EventAccumulator`` over ``folder``, keeping everything."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    guidance = {
        ea.COMPRESSED_HISTOGRAMS: 0,
        ea.IMAGES: 0,
        ea.AUDIO: 0,
        ea.SCALARS: 0,
        ea.HISTOGRAMS: 0,
        ea.TENSORS: 0,
    }
    acc = ea.EventAccumulator(str(folder), size_guidance=guidance)
    acc.Reload()
    return acc


def oracle_values(folder: Path | str) -> dict[str, dict[int, Any]]:
    """Every tag of ``folder`` -> step -> what TensorBoard shows (a scalar's float, a
    histogram's ``HistogramValue``, a tensor's array); a step logged twice: the later value."""
    from tensorboard.util import tensor_util

    acc = oracle(folder)
    tags = acc.Tags()
    out: dict[str, dict[int, Any]] = {}
    for tag in tags["scalars"]:
        out[tag] = {e.step: e.value for e in acc.Scalars(tag)}
    for tag in tags["histograms"]:
        out[tag] = {e.step: e.histogram_value for e in acc.Histograms(tag)}
    for tag in tags["tensors"]:
        out[tag] = {e.step: tensor_util.make_ndarray(e.tensor_proto) for e in acc.Tensors(tag)}
    return out
