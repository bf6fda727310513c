"""The floors of ``bench/large_tensors.py``: the three rule bodies with no reader at all.

``StepFiles`` reads a step's event file **once**: one open, one ``readinto`` into a buffer of
its own (two buffers, alternating, so that the previous step's values stay valid for
WeightUpdateRatio), every record framed (its length and the length of the next record's
header checked, as a reader must), and ``numpy.frombuffer`` of the tensors asked for (the
``tensor_content`` field found by its tag and length inside the tensor's record, whose start
the index file gives). No copy of a value is made.

Two floors use it, both in one thread:

* ``floor`` (per body): each body walks the steps and reads each step's file once, as a rule
  that reads a step's values together would: three walks, each file read three times;
* ``floor-once``: one walk, each event file read exactly once in the whole run, the three
  bodies' numpy work done on the values of the step at hand (the absolute floor: ours cannot
  share reads between rules that run one after the other).

Both compute the same numbers in the same order as the readers (checksum compared).
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable

import numpy as np

_HEADER = struct.Struct("<QI")


def _marker(count: int) -> bytes:
    """TensorProto.tensor_content (field 4, length-delimited) of ``count`` float32."""
    size, varint = 4 * count, bytearray()
    while True:
        varint.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    return b"\x22" + bytes(varint)


class StepFiles:
    """The trial's index files parsed once; a step's values read from its event file once."""

    def __init__(self, path: str, size: int) -> None:
        self.path, self.size = path, size
        self.where: dict[int, tuple[str, dict[str, int]]] = {}
        root = os.path.join(path, "index")
        for folder in os.scandir(root):
            for entry in os.scandir(folder.path):
                with open(entry.path, "rb") as f:
                    doc = json.loads(f.read())
                step = int(entry.name.split("_", 1)[0])
                starts = {t["tensorname"]: t["start_idx"] for t in doc["tensor_payload"]}
                self.where[step] = (doc["meta"]["event_file_name"], starts)
        self.steps = sorted(self.where)
        self._buffers = [bytearray(), bytearray()]
        self._turn = 0
        self.read_s = 0.0

    def values(self, step: int, names: list[str]) -> dict[str, np.ndarray]:
        """The arrays of ``names`` at ``step``: views of this step's buffer (valid until the
        step after next is read)."""
        t = time.perf_counter()
        event, starts = self.where[step]
        self._turn ^= 1
        buf = self._buffers[self._turn]
        with open(os.path.join(self.path, event), "rb", buffering=0) as f:
            n = os.fstat(f.fileno()).st_size
            if len(buf) < n:
                buf.extend(bytes(n - len(buf)))
            view = memoryview(buf)[:n]
            if f.readinto(view) != n:
                raise SystemExit(f"short read of {event}")
        records: set[int] = set()
        at = 0
        while at < n:  # frame every record
            length, _ = _HEADER.unpack_from(buf, at)
            if at + 16 + length > n:
                raise SystemExit(f"bad record {event}:{at}")
            records.add(at)
            at += 16 + length
        out: dict[str, np.ndarray] = {}
        for name in names:
            start = starts[name]
            if start not in records:
                raise SystemExit(f"{name} at {event}:{start} is no record")
            length, _ = _HEADER.unpack_from(buf, start)
            count = 1 if name == "loss" else self.size
            marker = _marker(count)
            found = buf.find(marker, start + 12, start + 12 + length) + len(marker)
            out[name] = np.frombuffer(buf, np.float32, count, found)
        self.read_s += time.perf_counter() - t
        return out


Bodies = dict[str, Callable[[dict[str, np.ndarray], dict[str, np.ndarray] | None], list[float]]]


def bodies(gradients: list[str], weights: list[str]) -> Bodies:
    """The numpy work of each body at one step (the values of the step and of the step
    before, None at the first), as the readers' bodies do it."""

    def vanishing(now: dict, _before: dict | None) -> list[float]:
        return [float(np.mean(np.abs(now[n]))) for n in gradients]

    def exploding(now: dict, _before: dict | None) -> list[float]:
        return [
            float(bool(np.isnan(now[n]).any() or np.isinf(now[n]).any()))
            for n in [*gradients, *weights, "loss"]
        ]

    def update_ratio(now: dict, before: dict | None) -> list[float]:
        if before is None:
            return []
        return [
            float(np.linalg.norm(now[n] - before[n]) / np.linalg.norm(before[n])) for n in weights
        ]

    return {
        "VanishingGradient": vanishing,
        "ExplodingTensor": exploding,
        "WeightUpdateRatio": update_ratio,
    }


def run_floor(path: str, size: int, gradients: list[str], weights: list[str], once: bool):
    """(phases, numbers) of ``floor`` (per body) or ``floor-once``."""
    start = time.perf_counter()
    files = StepFiles(path, size)
    phases = {"open": time.perf_counter() - start}
    work = bodies(gradients, weights)
    wanted = {
        "VanishingGradient": gradients,
        "ExplodingTensor": [*gradients, *weights, "loss"],
        "WeightUpdateRatio": weights,
    }
    numbers: dict[str, list[float]] = {body: [] for body in work}
    if once:
        spent = dict.fromkeys(work, 0.0)
        every = [*gradients, *weights, "loss"]
        before = None
        for step in files.steps:
            now = files.values(step, every)
            for body, fn in work.items():
                t = time.perf_counter()
                numbers[body] += fn(now, before)
                spent[body] += time.perf_counter() - t
            before = now
        phases.update(spent)
        phases["read"] = files.read_s
    else:
        for body, fn in work.items():
            t = time.perf_counter()
            before = None
            for step in files.steps:
                now = files.values(step, wanted[body])
                numbers[body] += fn(now, before)
                before = now
            phases[body] = time.perf_counter() - t
    phases["rules"] = time.perf_counter() - start - phases["open"]
    return phases, [x for body in work for x in numbers[body]]
