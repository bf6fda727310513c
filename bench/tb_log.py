"""Bench: reading a large TensorBoard log, ours against TensorBoard's own EventAccumulator.

Writes a log of ``--scalars`` scalar events (``--tags`` tags, one event per tag per step,
``simple_value`` as torch and tensorboardX write them) and ``--histograms`` ``HistogramProto``
histograms (4 tags, 30 buckets each), then, each side in a fresh process (peak memory is the
process's ``ru_maxrss``):

* TensorBoard: ``EventAccumulator(size_guidance=0)`` (keeps everything), ``Reload()``, and every
  value of every tag (``Scalars``, ``Histograms``);
* ours: ``create_trial``, and every value of every tag (the public batched ``Tensor.column()``
  of each scalar tag, and for each histogram step the exact reductions and the buckets).

CPU seconds are counted from the process's start (imports included) until every value is read.
Both sides then write a digest of every value they read (not counted); the run checks the
digests are equal (values match) and writes the figures into bench/RESULTS.md (a section of
its own).

    .venv/bin/python bench/tb_log.py --scalars 20000 --histograms 400    # quick check
    .venv/bin/python bench/tb_log.py                                     # 1,000,000 / 20,000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORK = ROOT / "bench" / ".work" / "tensorboard"
RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN = "<!-- tensorboard bench: begin -->"
END = "<!-- tensorboard bench: end -->"
HIST_TAGS = ("fc1.weight", "fc1.weight.grad", "fc2.weight", "fc2.weight.grad")


def write_log(folder: Path, scalars: int, histograms: int, tags: int) -> Path:
    """The log, written with our protobuf classes and TensorBoard's framing (payload CRC)."""
    from evaluator.formats.proto import event_pb2, summary_pb2
    from evaluator.formats.tfrecord import encode_record

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.tfevents.1700000000.bench.1.0"
    steps = scalars // tags
    hist_every = max(1, steps * len(HIST_TAGS) // max(1, histograms))
    rng = np.random.default_rng(5)
    edges = np.linspace(-1, 1, 31)
    with open(path, "wb") as f:
        first = event_pb2.Event(wall_time=1.0, file_version="brain.Event:2")
        f.write(encode_record(first.SerializeToString(), payload_crc=True))
        written = 0
        for step in range(steps):
            for t in range(tags):
                value = summary_pb2.Summary.Value(
                    tag=f"scalar_{t}", simple_value=1.0 / (step + t + 1)
                )
                event = event_pb2.Event(
                    wall_time=1.0 + step, step=step, summary=summary_pb2.Summary(value=[value])
                )
                f.write(encode_record(event.SerializeToString(), payload_crc=True))
            if step % hist_every == 0 and written < histograms:
                for tag in HIST_TAGS:
                    x = rng.normal(0, 0.1, 1000)
                    counts, _ = np.histogram(x, edges)
                    h = summary_pb2.HistogramProto(
                        min=float(x.min()),
                        max=float(x.max()),
                        num=len(x),
                        sum=float(x.sum()),
                        sum_squares=float(np.dot(x, x)),
                        bucket_limit=list(edges[1:]),
                        bucket=[float(c) for c in counts],
                    )
                    value = summary_pb2.Summary.Value(tag=tag, histo=h)
                    event = event_pb2.Event(
                        wall_time=1.0 + step, step=step, summary=summary_pb2.Summary(value=[value])
                    )
                    f.write(encode_record(event.SerializeToString(), payload_crc=True))
                    written += 1
    return folder


class _Digest:
    """SHA-256 of every (tag, step, values) in sorted order, fed one tag at a time in tag
    order (the same bytes as sorting every item of every tag at once)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.count = 0
        self._last = ""

    def add(self, tag: str, items: list[tuple[int, tuple[float, ...]]]) -> None:
        assert tag >= self._last, "tags must come in sorted order"
        self._last = tag
        for step, values in sorted(items):
            self.h.update(tag.encode())
            self.h.update(struct.pack(f"<q{len(values)}d", step, *values))
        self.count += len(items)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime  # every thread, imports too


def side_tensorboard(folder: str) -> dict[str, object]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    start = time.perf_counter()
    guidance = {k: 0 for k in (ea.SCALARS, ea.HISTOGRAMS, ea.TENSORS, ea.IMAGES, ea.AUDIO)}
    guidance[ea.COMPRESSED_HISTOGRAMS] = 0
    acc = ea.EventAccumulator(folder, size_guidance=guidance)
    acc.Reload()
    tags = acc.Tags()
    read = {tag: acc.Scalars(tag) for tag in tags["scalars"]}
    hists = {tag: acc.Histograms(tag) for tag in tags["histograms"]}
    seconds, cpu = time.perf_counter() - start, _cpu()
    digest = _Digest()  # not measured: the same check on both sides
    for tag in sorted({*read, *hists}):
        if tag in read:
            digest.add(tag, [(e.step, (e.value,)) for e in read[tag]])
            continue
        items = []
        for e in hists[tag]:
            h = e.histogram_value
            items.append((e.step, (h.min, h.max, h.num, h.sum / h.num, *h.bucket)))
        digest.add(tag, items)
    return {
        "seconds": seconds,
        "cpu_read": cpu,
        "values": digest.count,
        "digest": digest.h.hexdigest(),
    }


def side_ours(folder: str) -> dict[str, object]:
    from evaluator.trial import create_trial

    start = time.perf_counter()
    read: dict[str, list[tuple[int, tuple[float, ...]]]] = {}
    columns = {}
    with create_trial(folder, idle_scans_to_complete=1) as trial:
        hists = set(trial.tensor_names(collection="histograms"))
        for tag in trial.tensor_names():
            tensor = trial.tensor(tag)
            if tag in hists:
                items = []
                for step in tensor.steps():
                    h = tensor.histogram(step)
                    mean = tensor.reduction_value(step, "mean")
                    buckets = tuple(h.buckets[:, 2].tolist())
                    items.append((step, (h.min, h.max, h.count, float(mean), *buckets)))
                read[tag] = items
            else:
                columns[tag] = tensor.column()  # every step's value at once
        seconds, cpu = time.perf_counter() - start, _cpu()
    digest = _Digest()  # not measured: the same check on both sides
    for tag in sorted({*read, *columns}):
        if tag in read:
            digest.add(tag, read[tag])
        else:
            col = columns[tag]
            digest.add(tag, [(s, (v,)) for s, v in zip(col.steps, col.values.tolist())])
    return {
        "seconds": seconds,
        "cpu_read": cpu,
        "values": digest.count,
        "digest": digest.h.hexdigest(),
    }


def _child(side: str, folder: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--side", side, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument("--histograms", type=int, default=20_000)
    parser.add_argument("--tags", type=int, default=5)
    parser.add_argument("--side", choices=("tensorboard", "ours"))
    parser.add_argument("folder", nargs="?")
    parser.add_argument("--no-write-results", action="store_true")
    args = parser.parse_args()
    if args.side:
        result = (side_tensorboard if args.side == "tensorboard" else side_ours)(args.folder)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["peak_mib"] = usage.ru_maxrss / 1024
        result["cpu_total"] = _cpu()  # the digest too
        result["cpu_seconds"] = result.pop("cpu_read")  # imports and reading, not the digest
        print(json.dumps(result))
        return 0
    folder = WORK / f"log_{args.scalars}x{args.histograms}"
    if not folder.exists():
        t = time.perf_counter()
        write_log(folder, args.scalars, args.histograms, args.tags)
        print(f"wrote {folder} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    size = sum(p.stat().st_size for p in folder.iterdir())
    tb = _child("tensorboard", str(folder))
    ours = _child("ours", str(folder))
    # CPU seconds of the whole process decide: on a shared machine wall time measures the load.
    speed = tb["cpu_seconds"] / ours["cpu_seconds"]  # type: ignore[operator]
    memory = tb["peak_mib"] / ours["peak_mib"]  # type: ignore[operator]
    match = tb["digest"] == ours["digest"] and tb["values"] == ours["values"]
    row = (
        f"| {args.scalars:,} scalars + {args.histograms:,} histograms ({size / 2**20:.0f} MiB) "
        f"| {tb['cpu_seconds']:.1f} | {ours['cpu_seconds']:.1f} | {speed:.1f}x | "
        f"{'yes' if speed >= 10 else 'NO'} | {tb['seconds']:.1f} | {ours['seconds']:.1f} | "
        f"{tb['peak_mib']:.0f} | {ours['peak_mib']:.0f} | "
        f"{memory:.2f}x | {'yes' if memory > 1 else 'NO'} | "
        f"{'match' if match else 'DIFFER'} ({tb['values']:,} values) |"
    )
    print(row)
    if not args.no_write_results:
        _write_results(row)
        sys.path.insert(0, str(ROOT / "bench"))
        from scale_report import store  # the figures bench/guard.py compares

        store(
            "tensorboard",
            {
                "scalars": args.scalars,
                "histograms": args.histograms,
                "cpu_s": {"tensorboard": tb["cpu_seconds"], "ours": ours["cpu_seconds"]},
                "peak_mib": {"tensorboard": tb["peak_mib"], "ours": ours["peak_mib"]},
                "speedup_cpu": round(speed, 2),
                "memory_ratio": round(memory, 2),
                "match": match,
            },
        )
    return 0 if match else 1


def _write_results(row: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else ""
    section = "\n".join(
        [
            BEGIN,
            "## TensorBoard logs: ours against EventAccumulator",
            "",
            f"_Written {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by "
            "`bench/tb_log.py` (one run, each side in a fresh process; peak memory is the "
            "process's `ru_maxrss`)._ Both read every value of every tag of one local log "
            "(`simple_value` scalars, 5 tags; `HistogramProto` histograms, 4 tags, 30 buckets): "
            "TensorBoard 2.x `EventAccumulator(size_guidance=0)` with `Reload()` then its "
            "batched `Scalars(tag)`/`Histograms(tag)`, against `create_trial` then the public "
            "batched `Tensor.column()` of each scalar tag (every step's value in one array) and, "
            "per step, `histogram` + `reduction_value(mean)` of each histogram. values: the "
            "SHA-256 of every (tag, step, value, min, max, count, mean, bucket counts) equal.",
            "",
            "Speed-up is on CPU seconds (user + system, every thread, imports included) from the "
            "process's start until every value is read; the digest of the values, computed "
            "afterwards the same way on both sides, is not counted (peak memory includes it). "
            "On this shared 2-core machine the wall time (also shown) measures the other jobs, "
            "and even CPU seconds grow with the load (see the history below).",
            "",
            "| log | EventAccumulator CPU s | ours CPU s | speed-up | ≥10x | "
            "EventAccumulator wall s | ours wall s | EventAccumulator peak MiB "
            "| ours peak MiB | memory ratio | lower | values |",
            "|---|---:|---:|---:|:-:|---:|---:|---:|---:|---:|:-:|---|",
            row,
            END,
        ]
    )
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    RESULTS.write_text(text)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
