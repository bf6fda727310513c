"""Write TensorBoard event files from plain numbers, and rewrite existing ones: for tests,
benchmarks and rule authors who want a TensorBoard log without a training job::

    from evaluator.testing.tb_writer import read_scalars, write_scalars

    write_scalars("/tmp/run", {"train/loss": [(1, 2.3), (2, 2.1)], "train/grad_norm": [...]})
    scalars = read_scalars("/tmp/run")  # {tag: [(step, value, wall_time)]}, in file order

The file is what torch's ``SummaryWriter`` writes for ``add_scalar``: a ``file_version``
event, then one event per value with a ``simple_value`` summary, framed as TFRecords with
real payload checksums. ``wall_time`` is the event's time (seconds): given per value as a
third element, or ``start_time + step`` by default.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensorboard.summary import is_event_file
from evaluator.formats.tfrecord import encode_record, iter_records

__all__ = ["read_scalars", "write_scalars"]

Point = tuple[int, float] | tuple[int, float, float]


def write_scalars(
    folder: str | os.PathLike[str],
    scalars: Mapping[str, Iterable[Point]],
    *,
    start_time: float = 1_700_000_000.0,
    host: str = "testing",
) -> Path:
    """Write ``scalars`` (tag -> [(step, value) or (step, value, wall_time)]) into one event
    file in ``folder``, events in step order (a step's tags in the order given)."""
    events: list[tuple[int, int, float, str, float]] = []
    for order, (tag, points) in enumerate(scalars.items()):
        for point in points:
            step, value = int(point[0]), float(point[1])
            wall = float(point[2]) if len(point) > 2 else start_time + step
            events.append((step, order, wall, tag, value))
    events.sort(key=lambda e: (e[0], e[1]))
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"events.out.tfevents.{int(start_time)}.{host}.1.0"
    with open(path, "wb") as f:
        first = event_pb2.Event(wall_time=start_time, file_version="brain.Event:2")
        f.write(encode_record(first.SerializeToString(), payload_crc=True))
        for step, _, wall, tag, value in events:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            event = event_pb2.Event(wall_time=wall, step=step, summary=summary)
            f.write(encode_record(event.SerializeToString(), payload_crc=True))
    return path


def read_scalars(folder: str | os.PathLike[str]) -> dict[str, list[tuple[int, float, float]]]:
    """Every ``simple_value`` of the event files directly in ``folder`` (name order):
    tag -> [(step, value, wall_time)] in the order written."""
    found: dict[str, list[tuple[int, float, float]]] = {}
    for path in sorted(Path(folder).iterdir()):
        if not is_event_file(path.name):
            continue
        data = path.read_bytes()
        for record in iter_records(data, source=str(path)):
            event = event_pb2.Event.FromString(bytes(record.payload))
            for value in event.summary.value:
                if value.WhichOneof("value") == "simple_value":
                    found.setdefault(value.tag, []).append(
                        (event.step, value.simple_value, event.wall_time)
                    )
    return found
